// Image parts of chat requests as the parsers check and keep them (image_input.h takes them from
// there): Chat Completions' {"type": "image_url", "image_url": {"url": "data:...", "detail"}}, the
// form Responses' input_image parts and Anthropic's image blocks are translated into. No vision
// code here: the parsers (and the fuzz targets) use it without a projector.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace pagoda::server {

// The text the chat template writes for an image part (Gemma 3's image marker).
inline constexpr const char* kImageMarker = "<start_of_image>";

// llama-server's media marker: where a /v1/completions prompt object's multimodal_data items go.
inline constexpr const char* kMediaMarker = "<__media__>";
size_t count_media_markers(std::string_view text);
// The text cut at each media marker: one piece more than there are markers (views into `text`).
std::vector<std::string_view> media_pieces(std::string_view text);

// An image part of a chat request as the parsers left it: where it was and its data: URL.
struct ImagePart {
    std::string where;  // "messages[1].content[0]"
    std::string url;
    std::string url_param;  // "messages[1].content[0].image_url.url": what a URL's refusal names
};
// The image_url parts of chat messages, in message and part order (the order a template renders).
std::vector<ImagePart> image_parts(const nlohmann::json& messages);

// Checks a Chat Completions image_url part ({"type": "image_url", "image_url": {"url", "detail"}})
// for the parser: the url must be a data: URL or a well-formed http(s) URL (image_url.h; whether it
// is fetched is the server's --allow-image-urls, which the gateway checks) and detail, if given,
// "auto" (Gemma 3 sees every image at one resolution). Throws ApiError naming it.
void check_image_part(const nlohmann::json& part, const std::string& where);

// A chat image_url part for a data: or http(s) URL (what the Responses and Anthropic translations emit).
nlohmann::json image_url_part(const std::string& url);

}  // namespace pagoda::server
