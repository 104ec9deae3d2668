// Key-file parsing (settings, comments, clear errors), lookup and Bearer parsing.
#include <gtest/gtest.h>

#include "core/error.h"
#include "server/api_keys.h"

using namespace pagoda::server;

namespace {
std::string error_of(const std::string& text) {
    try {
        ApiKeyTable::parse(text, "keys.txt");
    } catch (const pagoda::Error& e) {
        return e.what();
    }
    return "";
}
}  // namespace

TEST(ApiKeys, ParsesKeysSettingsAndComments) {
    auto t = ApiKeyTable::parse(
        "# team keys\n"
        "\n"
        "sk-alice-0001 name=alice rpm=60 tpm=10000 concurrency=4  # alice's\n"
        "   sk-bob-00002\n",
        "keys.txt");
    ASSERT_EQ(t.size(), 2u);
    EXPECT_EQ(t.keys()[0].key, "sk-alice-0001");
    EXPECT_EQ(t.keys()[0].name, "alice");
    EXPECT_EQ(t.keys()[0].limits.rpm, 60);
    EXPECT_EQ(t.keys()[0].limits.tpm, 10000);
    EXPECT_EQ(t.keys()[0].limits.concurrency, 4);
    EXPECT_EQ(t.keys()[1].name, "key4");  // default: line number
    EXPECT_EQ(t.keys()[1].limits.rpm, 0);
    ASSERT_NE(t.find("sk-bob-00002"), nullptr);
    EXPECT_EQ(t.find("sk-bob-00002")->name, "key4");
    EXPECT_EQ(t.find("sk-bob-0000"), nullptr);
    EXPECT_EQ(t.find("sk-bob-000022"), nullptr);
    EXPECT_EQ(t.find(""), nullptr);
}

TEST(ApiKeys, ErrorsNameLineAndProblem) {
    EXPECT_EQ(error_of("sk-key-0001 rpm=ten\n"), "keys.txt line 1: 'rpm' must be a non-negative integer, got 'ten'");
    EXPECT_EQ(error_of("# c\nsk-key-0001 colour=blue\n"),
              "keys.txt line 2: unknown setting 'colour' (known: name, rpm, tpm, concurrency, weight, priority, timeout, admin)");
    EXPECT_EQ(error_of("sk-key-0001 rpm\n"),
              "keys.txt line 1: expected setting=value (name, rpm, tpm, concurrency, weight, priority, timeout, admin), got 'rpm'");
    EXPECT_EQ(error_of("short\n"), "keys.txt line 1: the key is 5 characters; use at least 8");
    EXPECT_EQ(error_of("sk-key-0001\nsk-key-0001\n"), "keys.txt line 2: this key already appears on an earlier line");
    EXPECT_EQ(error_of("sk-key-0001 name=a\nsk-key-0002 name=a\n"),
              "keys.txt line 2: the name 'a' is already used by another key");
    EXPECT_EQ(error_of("sk-key-0001 name=a\"b\n"),
              "keys.txt line 1: name 'a\"b' must be 1-64 characters of letters, digits, '-', '_', '.', '@'");
    EXPECT_EQ(error_of("# only comments\n\n"), "keys.txt: no keys found (one key per line; '#' starts a comment)");
    EXPECT_EQ(error_of("rpm=5 sk-key-0001\n"), "keys.txt line 1: the line must start with the key, got the setting 'rpm=5'");
    EXPECT_EQ(error_of("sk-key-0001 rpm=-1\n"), "keys.txt line 1: 'rpm' must be a non-negative integer, got '-1'");
    EXPECT_EQ(error_of("sk-key-0001 admin=yes\n"), "keys.txt line 1: 'admin' must be true or false, got 'yes'");
}

TEST(ApiKeys, AdminSettingMarksAdminKeys) {
    auto t = ApiKeyTable::parse("sk-ops-00001 admin=true\nsk-user-0002\nsk-user-0003 admin=false\n", "keys.txt");
    EXPECT_TRUE(t.keys()[0].admin);
    EXPECT_FALSE(t.keys()[1].admin);
    EXPECT_FALSE(t.keys()[2].admin);
}

TEST(ApiKeys, FairShareWeightPriorityClassAndTenant) {
    auto t = ApiKeyTable::parse("sk-gold-0001 weight=3 priority=-10\nsk-free-0002 weight=0.5\nsk-norm-0003\n", "keys.txt");
    ASSERT_EQ(t.size(), 3u);
    EXPECT_EQ(t.keys()[0].weight, 3.0);
    EXPECT_EQ(t.keys()[0].best_priority, -10);
    EXPECT_EQ(t.keys()[1].weight, 0.5);
    EXPECT_EQ(t.keys()[1].best_priority, 0);
    EXPECT_EQ(t.keys()[2].weight, 1.0);
    // Tenants are distinct and never 0 (the anonymous tenant of an open server).
    EXPECT_EQ(t.keys()[0].tenant, 1u);
    EXPECT_EQ(t.keys()[1].tenant, 2u);
    EXPECT_EQ(t.keys()[2].tenant, 3u);
    EXPECT_EQ(error_of("sk-key-0001 weight=0\n"), "keys.txt line 1: 'weight' must be a number from 0.001 to 1000, got '0'");
    EXPECT_EQ(error_of("sk-key-0001 weight=nan\n"), "keys.txt line 1: 'weight' must be a number from 0.001 to 1000, got 'nan'");
    EXPECT_EQ(error_of("sk-key-0001 weight=2x\n"), "keys.txt line 1: 'weight' must be a number from 0.001 to 1000, got '2x'");
    EXPECT_EQ(ApiKeyTable::parse("sk-key-0001 timeout=2.5\n", "k").keys()[0].start_timeout, 2.5);
    EXPECT_EQ(ApiKeyTable::parse("sk-key-0001\n", "k").keys()[0].start_timeout, 0);
    EXPECT_EQ(error_of("sk-key-0001 timeout=0\n"),
              "keys.txt line 1: 'timeout' must be a number of seconds above 0 and at most 86400, got '0'");
    EXPECT_EQ(error_of("sk-key-0001 priority=1.5\n"),
              "keys.txt line 1: 'priority' must be an integer from -1000000 to 1000000, got '1.5'");
    EXPECT_EQ(error_of("sk-key-0001 priority=-9999999\n"),
              "keys.txt line 1: 'priority' must be an integer from -1000000 to 1000000, got '-9999999'");
}

TEST(ApiKeys, MissingFileIsAClearError) {
    try {
        ApiKeyTable::load("/nonexistent/keys.txt");
        FAIL();
    } catch (const pagoda::Error& e) {
        EXPECT_STREQ(e.what(), "cannot open the API key file '/nonexistent/keys.txt'");
    }
}

TEST(ApiKeys, ConstantTimeEqualIsEquality) {
    EXPECT_TRUE(constant_time_equal("abcdefgh", "abcdefgh"));
    EXPECT_FALSE(constant_time_equal("abcdefgh", "abcdefgx"));
    EXPECT_FALSE(constant_time_equal("abcdefgh", "abcdefg"));
    EXPECT_FALSE(constant_time_equal("abcdefg", "abcdefgh"));
    EXPECT_FALSE(constant_time_equal("abcabc", "abc"));  // repeats of the shorter one
    EXPECT_FALSE(constant_time_equal("", "abc"));
    EXPECT_FALSE(constant_time_equal("abc", ""));
    EXPECT_TRUE(constant_time_equal("", ""));
}

TEST(ApiKeys, BearerToken) {
    EXPECT_EQ(bearer_token("Bearer sk-123"), "sk-123");
    EXPECT_EQ(bearer_token("bearer   sk-123  "), "sk-123");
    EXPECT_EQ(bearer_token("Basic abc"), "");
    EXPECT_EQ(bearer_token("Bearer"), "");
    EXPECT_EQ(bearer_token(""), "");
}
