// JPEG through libjpeg(-turbo)'s decompressor, asked for RGB output (it converts YCbCr and
// grayscale). libjpeg reports errors through error_exit, which must not return: it longjmps back to
// the one function that holds the decompressor, whose frame has only plain data.
#include <cstdio>
// jpeglib.h needs size_t and FILE declared first.
#include <jpeglib.h>

#include <csetjmp>

#include "core/error.h"
#include "vision/image.h"

namespace pagoda::vision {

namespace {

struct JpegError {
    jpeg_error_mgr mgr;
    std::jmp_buf jump;
    char message[JMSG_LENGTH_MAX];
};

void on_error_exit(j_common_ptr cinfo) {
    auto* e = reinterpret_cast<JpegError*>(cinfo->err);
    (*cinfo->err->format_message)(cinfo, e->message);
    std::longjmp(e->jump, 1);
}
// A warning (level -1) means corrupt data libjpeg would paper over, e.g. a truncated file filled
// with gray: an error here, as PIL raises on truncated images. Trace messages (level >= 0) are dropped.
void on_emit_message(j_common_ptr cinfo, int level) {
    if (level < 0) on_error_exit(cinfo);
}

enum class Stage { ok, error, cmyk, too_big };

// Decodes into `out` (sized by `allocate` once the header is known). Only plain data lives here.
struct JpegJob {
    const uint8_t* data;
    size_t size;
    uint64_t max_pixels;
    uint8_t* (*allocate)(void* ctx, size_t n);
    void* ctx;
    JDIMENSION width = 0, height = 0;
    JpegError err;
};

Stage run(JpegJob& job) {
    jpeg_decompress_struct cinfo;
    cinfo.err = jpeg_std_error(&job.err.mgr);
    job.err.mgr.error_exit = on_error_exit;
    job.err.mgr.emit_message = on_emit_message;
    job.err.message[0] = 0;
    if (setjmp(job.err.jump)) {
        jpeg_destroy_decompress(&cinfo);
        return Stage::error;
    }
    jpeg_create_decompress(&cinfo);
    jpeg_mem_src(&cinfo, job.data, static_cast<unsigned long>(job.size));
    jpeg_read_header(&cinfo, TRUE);
    if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) {
        jpeg_destroy_decompress(&cinfo);
        return Stage::cmyk;
    }
    job.width = cinfo.image_width;
    job.height = cinfo.image_height;
    if (job.width == 0 || job.height == 0 || uint64_t(job.width) * job.height > job.max_pixels) {
        jpeg_destroy_decompress(&cinfo);
        return Stage::too_big;
    }
    cinfo.out_color_space = JCS_RGB;
    jpeg_start_decompress(&cinfo);
    if (cinfo.output_components != 3 || cinfo.output_width != job.width || cinfo.output_height != job.height) {
        jpeg_destroy_decompress(&cinfo);
        return Stage::error;
    }
    uint8_t* out = job.allocate(job.ctx, size_t(job.width) * job.height * 3);
    while (cinfo.output_scanline < cinfo.output_height) {
        JSAMPROW row = out + size_t(cinfo.output_scanline) * job.width * 3;
        jpeg_read_scanlines(&cinfo, &row, 1);
    }
    jpeg_finish_decompress(&cinfo);
    jpeg_destroy_decompress(&cinfo);
    return Stage::ok;
}

}  // namespace

Image decode_jpeg(std::span<const uint8_t> bytes, const DecodeLimits& limits, std::string_view what) {
    Image image;
    JpegJob job{.data = bytes.data(), .size = bytes.size(), .max_pixels = limits.max_pixels,
                .allocate = [](void* ctx, size_t n) {
                    auto* rgb = static_cast<std::vector<uint8_t>*>(ctx);
                    rgb->assign(n, 0);
                    return rgb->data();
                },
                .ctx = &image.rgb};
    // The allocation is the one C++ call inside run(); it happens before any further libjpeg call
    // can jump, and a bad_alloc from it unwinds normally (no jump crosses it).
    switch (run(job)) {
        case Stage::ok: break;
        case Stage::error:
            fail("{}: invalid JPEG: {}", what, job.err.message[0] ? job.err.message : "unexpected decoder output");
        case Stage::cmyk: fail("{}: CMYK/YCCK JPEG images are not supported (convert to RGB)", what);
        case Stage::too_big: check_image_size(job.width, job.height, limits, what, "JPEG"); break;
    }
    image.width = job.width;
    image.height = job.height;
    return image;
}

}  // namespace pagoda::vision
