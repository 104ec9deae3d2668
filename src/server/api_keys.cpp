#include "server/api_keys.h"

#include <cctype>
#include <charconv>
#include <fstream>
#include <set>
#include <sstream>

#include "core/error.h"
#include "server/openai_request.h"

namespace pagoda::server {

bool constant_time_equal(std::string_view a, std::string_view b) {
    // Walk the presented string fully whatever the stored length; the length check is folded in.
    unsigned char diff = a.size() == b.size() ? 0 : 1;
    for (size_t i = 0; i < a.size(); ++i) {
        unsigned char other = b.empty() ? 0 : static_cast<unsigned char>(b[i % b.size()]);
        diff |= static_cast<unsigned char>(a[i]) ^ other;
    }
    return diff == 0;
}

std::string_view bearer_token(std::string_view h) {
    while (!h.empty() && (h.front() == ' ' || h.front() == '\t')) h.remove_prefix(1);
    while (!h.empty() && (h.back() == ' ' || h.back() == '\t')) h.remove_suffix(1);
    if (h.size() < 7) return {};
    static constexpr std::string_view scheme = "bearer ";
    for (size_t i = 0; i < scheme.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(h[i])) != scheme[i]) return {};
    h.remove_prefix(scheme.size());
    while (!h.empty() && h.front() == ' ') h.remove_prefix(1);
    return h;
}

const ApiKey* ApiKeyTable::find(std::string_view presented) const {
    const ApiKey* match = nullptr;
    for (const auto& k : keys_)  // no early exit: every key is compared
        if (constant_time_equal(presented, k.key) && !match) match = &k;
    return match;
}

namespace {

int64_t parse_limit(std::string_view value, const std::string& where, std::string_view setting) {
    int64_t x = -1;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), x);
    if (ec != std::errc() || end != value.data() + value.size() || x < 0)
        fail("{}: '{}' must be a non-negative integer, got '{}'", where, setting, value);
    return x;
}

double parse_weight(std::string_view value, const std::string& where) {
    double x = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), x);
    if (ec != std::errc() || end != value.data() + value.size() || !(x >= 0.001 && x <= 1000))
        fail("{}: 'weight' must be a number from 0.001 to 1000, got '{}'", where, value);
    return x;
}

double parse_timeout(std::string_view value, const std::string& where) {
    double x = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), x);
    if (ec != std::errc() || end != value.data() + value.size() || !(x > 0 && x <= kMaxStartTimeout))
        fail("{}: 'timeout' must be a number of seconds above 0 and at most {}, got '{}'", where, kMaxStartTimeout, value);
    return x;
}

int32_t parse_priority(std::string_view value, const std::string& where) {
    int64_t x = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), x);
    if (ec != std::errc() || end != value.data() + value.size() || x < -kMaxPriority || x > kMaxPriority)
        fail("{}: 'priority' must be an integer from {} to {}, got '{}'", where, -kMaxPriority, kMaxPriority, value);
    return int32_t(x);
}

bool name_ok(std::string_view name) {
    if (name.empty() || name.size() > 64) return false;
    for (char c : name)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == '@')) return false;
    return true;
}

}  // namespace

ApiKeyTable ApiKeyTable::parse(std::string_view text, const std::string& source) {
    ApiKeyTable table;
    std::set<std::string, std::less<>> names, keys;
    std::istringstream in{std::string(text)};
    std::string raw;
    int line_no = 0;
    while (std::getline(in, raw)) {
        ++line_no;
        const std::string where = source + " line " + std::to_string(line_no);
        if (auto hash = raw.find('#'); hash != std::string::npos) raw.resize(hash);
        std::istringstream words(raw);
        std::string word;
        if (!(words >> word)) continue;  // blank or comment
        ApiKey key;
        key.key = word;
        if (key.key.find('=') != std::string::npos)
            fail("{}: the line must start with the key, got the setting '{}'", where, key.key);
        if (key.key.size() < 8) fail("{}: the key is {} characters; use at least 8", where, key.key.size());
        for (char c : key.key)
            if (static_cast<unsigned char>(c) < 0x21 || static_cast<unsigned char>(c) > 0x7e)
                fail("{}: the key must be printable ASCII without spaces", where);
        key.name = "key" + std::to_string(line_no);
        while (words >> word) {
            auto eq = word.find('=');
            if (eq == std::string::npos || eq == 0)
                fail("{}: expected setting=value (name, rpm, tpm, concurrency, weight, priority, timeout, admin), got '{}'", where, word);
            std::string setting = word.substr(0, eq), value = word.substr(eq + 1);
            if (setting == "name") {
                if (!name_ok(value))
                    fail("{}: name '{}' must be 1-64 characters of letters, digits, '-', '_', '.', '@'", where, value);
                key.name = value;
            } else if (setting == "rpm") {
                key.limits.rpm = parse_limit(value, where, setting);
            } else if (setting == "tpm") {
                key.limits.tpm = parse_limit(value, where, setting);
            } else if (setting == "concurrency") {
                key.limits.concurrency = parse_limit(value, where, setting);
            } else if (setting == "weight") {
                key.weight = parse_weight(value, where);
            } else if (setting == "timeout") {
                key.start_timeout = parse_timeout(value, where);
            } else if (setting == "priority") {
                key.best_priority = parse_priority(value, where);
            } else if (setting == "admin") {
                if (value != "true" && value != "false") fail("{}: 'admin' must be true or false, got '{}'", where, value);
                key.admin = value == "true";
            } else {
                fail("{}: unknown setting '{}' (known: name, rpm, tpm, concurrency, weight, priority, timeout, admin)", where, setting);
            }
        }
        if (!keys.insert(key.key).second) fail("{}: this key already appears on an earlier line", where);
        if (!names.insert(key.name).second) fail("{}: the name '{}' is already used by another key", where, key.name);
        key.tenant = uint32_t(table.keys_.size() + 1);
        table.keys_.push_back(std::move(key));
    }
    if (table.keys_.empty()) fail("{}: no keys found (one key per line; '#' starts a comment)", source);
    return table;
}

ApiKeyTable ApiKeyTable::load(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("cannot open the API key file '{}'", path);
    std::ostringstream text;
    text << in.rdbuf();
    if (text.str().size() > (64u << 20)) fail("the API key file '{}' is larger than 64 MiB", path);
    return parse(text.str(), path);
}

}  // namespace pagoda::server
