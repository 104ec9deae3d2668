// GET /dashboard and /dashboard/FILE: the operations page's embedded files (dashboard_assets.h).
// The files hold no data — the page reads GET /v1/state, under /metrics's key rule — so they are
// served to anyone, and with keys the page asks for one (docs/api.md, "Dashboard").
#pragma once
#include <string_view>

#include "server/gateway.h"

namespace pagoda::server {

// True for the paths dashboard_file() answers: /dashboard, /dashboard/ and /dashboard/...
bool is_dashboard_path(std::string_view path);
// /dashboard and /dashboard/ give index.html; /dashboard/NAME the asset NAME. Throws ApiError 404
// for a name that is not one of them.
SimpleResponse dashboard_file(std::string_view path);

}  // namespace pagoda::server
