#include "server/image_parts.h"

#include <fmt/format.h>

#include "server/api_error.h"
#include "server/image_url.h"

namespace pagoda::server {

using json = nlohmann::json;

std::vector<ImagePart> image_parts(const json& messages) {
    std::vector<ImagePart> parts;
    if (!messages.is_array()) return parts;
    for (size_t i = 0; i < messages.size(); ++i) {
        const json& m = messages[i];
        if (!m.is_object()) continue;
        auto content = m.find("content");
        if (content == m.end() || !content->is_array()) continue;
        for (size_t j = 0; j < content->size(); ++j) {
            const json& part = (*content)[j];
            if (part.is_object() && part.value("type", "") == "image_url") {
                const std::string where = fmt::format("messages[{}].content[{}]", i, j);
                parts.push_back({where, part["image_url"]["url"].get<std::string>(), where + ".image_url.url"});
            }
        }
    }
    return parts;
}

void check_image_part(const json& part, const std::string& where) {
    for (auto it = part.begin(); it != part.end(); ++it)
        if (it.key() != "type" && it.key() != "image_url")
            throw ApiError::invalid(fmt::format("'{}.{}' is not a field of an image_url part", where, it.key()),
                                    where + "." + it.key(), "unsupported_parameter");
    auto image = part.find("image_url");
    if (image == part.end() || !image->is_object())
        throw ApiError::invalid(fmt::format("'{}.image_url' must be an object with a url", where), where + ".image_url",
                                "invalid_type");
    for (auto it = image->begin(); it != image->end(); ++it)
        if (it.key() != "url" && it.key() != "detail")
            throw ApiError::invalid(fmt::format("'{}.image_url.{}' is not a field of image_url", where, it.key()),
                                    where + ".image_url." + it.key(), "unsupported_parameter");
    if (auto detail = image->find("detail"); detail != image->end() && *detail != "auto")
        throw ApiError::invalid(fmt::format("'{}.image_url.detail': only \"auto\" is served (the model sees every image "
                                            "at its one resolution)",
                                            where),
                                where + ".image_url.detail", "unsupported_parameter");
    auto url = image->find("url");
    if (url == image->end() || !url->is_string())
        throw ApiError::invalid(fmt::format("'{}.image_url.url' must be a string (a data: URL)", where),
                                where + ".image_url.url", "invalid_type");
    const std::string& u = url->get_ref<const std::string&>();
    if (is_http_url(u)) {
        try {
            (void)parse_http_url(u);
        } catch (const std::exception& e) {
            throw ApiError::invalid(fmt::format("'{}.image_url.url' is not a usable image URL: {}", where, e.what()),
                                    where + ".image_url.url", "invalid_value");
        }
        return;
    }
    if (u.rfind("data:", 0) != 0)
        throw ApiError::invalid(fmt::format("'{}.image_url.url' must be a data: URL (data:image/png;base64,...) or an "
                                            "http(s) URL",
                                            where),
                                where + ".image_url.url", "invalid_value");
}

size_t count_media_markers(std::string_view text) {
    size_t n = 0;
    for (size_t at = text.find(kMediaMarker); at != std::string_view::npos;
         at = text.find(kMediaMarker, at + std::string_view(kMediaMarker).size()))
        ++n;
    return n;
}

std::vector<std::string_view> media_pieces(std::string_view text) {
    const std::string_view marker = kMediaMarker;
    std::vector<std::string_view> pieces;
    for (size_t from = 0;;) {
        const size_t at = text.find(marker, from);
        pieces.push_back(text.substr(from, at == std::string_view::npos ? std::string_view::npos : at - from));
        if (at == std::string_view::npos) return pieces;
        from = at + marker.size();
    }
}

json image_url_part(const std::string& url) { return json{{"type", "image_url"}, {"image_url", {{"url", url}}}}; }

}  // namespace pagoda::server
