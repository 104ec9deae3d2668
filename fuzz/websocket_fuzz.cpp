// libFuzzer entry for the /v1/ws server: after a fixed upgrade handshake, the bytes are what the
// client sends (frames: masked or not, fragmented, control frames, close) and Boost.Beast's server
// stream reads them through an in-memory stream with the options src/server/websocket_session.cpp
// sets (message size limit). Each message goes through the session's handling: decode_ws_envelope,
// cancel lookup in an in-flight table, ws_request_target and the gateway's completion pipeline; the
// reply (a JSON text frame) is written back as the session would.
// Oracle: frame errors end the read loop with a Beast error; message errors are ApiError only.
#include <boost/beast/_experimental/test/stream.hpp>
#include <boost/beast/websocket.hpp>
#include <cstddef>
#include <cstdint>
#include <set>

#include "fuzz/fuzz_support.h"
#include "server/api_error.h"
#include "server/http_common.h"
#include "server/ws_message.h"

using namespace pagoda;
using namespace pagoda::server;
using namespace pagoda::server::transport;
namespace websocket = beast::websocket;

namespace {

// The session's handle(): the reply it would send for one message.
nlohmann::json handle(const std::string& message, bool text, std::set<std::string>& in_flight) {
    WsMessage msg;
    try {
        decode_ws_envelope(message, text, msg);
        if (msg.cancel) {
            if (!in_flight.erase(msg.key)) throw ApiError(404, "no request with this id is in flight", "invalid_request_error", "id", "not_found");
            return {{"id", msg.id}, {"done", true}};
        }
        if (in_flight.count(msg.key)) throw ApiError::invalid("a request with this id is already in flight", "id", "duplicate_id");
        const WsRequestTarget target = ws_request_target(msg);
        const auto& templates = fuzz::builtin_templates();
        fuzz::run_completion_pipeline(*target.body, target.endpoint, &templates[message.size() % templates.size()],
                                      fuzz::small_tokenizer());
        if (in_flight.size() < 4) in_flight.insert(msg.key);  // stays "running" so later cancels find it
        return {{"id", msg.id}, {"chunk", nlohmann::json::object()}};
    } catch (const ApiError& e) {
        nlohmann::json out = {{"id", msg.id}, {"error", e.error_object()}};
        out["error"]["status"] = e.status;
        return out;
    } catch (const std::exception& e) {
        fuzz::unexpected("websocket message", e);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    net::io_context ioc;
    beast::test::stream client(ioc), server_end(ioc);
    server_end.connect(client);
    websocket::stream<beast::test::stream&> ws(server_end);
    ws.read_message_max(256 * 1024);
    ws.set_option(websocket::stream_base::decorator([](websocket::response_type& res) { res.set(http::field::server, "pagoda"); }));

    http::request<http::string_body> req{http::verb::get, "/v1/ws", 11};
    req.set(http::field::host, "localhost");
    req.set(http::field::upgrade, "websocket");
    req.set(http::field::connection, "upgrade");
    req.set(http::field::sec_websocket_key, "dGhlIHNhbXBsZSBub25jZQ==");
    req.set(http::field::sec_websocket_version, "13");
    beast::error_code ec;
    ws.accept(req, ec);
    if (ec) __builtin_trap();  // a valid handshake must be accepted

    server_end.append(std::string_view(reinterpret_cast<const char*>(data), size));
    server_end.close_remote();  // the client stops sending after these bytes

    std::set<std::string> in_flight;
    beast::flat_buffer buffer;
    for (int messages = 0; messages < 64; ++messages) {
        ws.read(buffer, ec);
        if (ec) break;  // a protocol error, the close handshake, or the end of the bytes
        const std::string message = beast::buffers_to_string(buffer.data());
        buffer.consume(buffer.size());
        const std::string reply = dump_json(handle(message, ws.got_text(), in_flight));
        ws.text(true);
        ws.write(net::buffer(reply), ec);
        if (ec) break;
    }
    return 0;
}
