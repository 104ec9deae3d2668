// libFuzzer entry for the GGUF reader: any input must either parse or throw pagoda::Error. When it
// parses, every value, getter and tensor byte is touched so the sanitizers see any bad view; the
// file is also read as a llama.cpp imatrix (quant/imatrix_file.h), and every tensor of a codebook
// type (IQ*, MXFP4) is dequantised, so arbitrary code bytes index the grids. A rank reranker's
// classification head (model/classifier_head.h) is read and, when it loads, applied once; a vision
// projector's (mmproj) metadata and tensor shapes are validated (vision/mmproj.h).
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "gguf/gguf.h"
#include "model/classifier_head.h"
#include "quant/codebook_blocks.h"
#include "quant/imatrix_file.h"
#include "vision/mmproj.h"

namespace {

using namespace pagoda::gguf;

uint64_t walk(const Value& v) {
    uint64_t h = uint64_t(v.type);
    if (const Array* a = v.as_array()) {
        for (const Value& item : a->items) h = h * 31 + walk(item);
        return h;
    }
    if (const std::string* s = v.as_string()) return h + s->size();
    if (auto i = v.as_int()) h += uint64_t(*i);
    if (auto u = v.as_uint()) h += *u;
    if (auto d = v.as_float()) h += uint64_t(*d != *d);
    return h;
}

template <class Fn>
void quietly(Fn&& fn) {
    try {
        fn();
    } catch (const pagoda::Error&) {
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::unique_ptr<File> f;
    try {
        f = File::parse(data, size, "fuzz-input");
    } catch (const pagoda::Error&) {
        return 0;
    }
    volatile uint64_t sink = 0;
    for (const auto& entry : f->metadata()) {
        const std::string& key = entry.first;  // (clang 14 lambdas cannot capture structured bindings)
        const Value& value = entry.second;
        sink = sink + walk(value) + value.to_display(3).size();
        quietly([&] { sink = sink + f->get_string(key).size(); });
        quietly([&] { sink = sink + uint64_t(f->get_int(key)); });
        quietly([&] { sink = sink + f->get_uint(key); });
        quietly([&] { sink = sink + uint64_t(f->get_float(key) != 0); });
        quietly([&] { sink = sink + f->get_bool(key); });
        quietly([&] { sink = sink + f->get_strings(key).size(); });
        quietly([&] { sink = sink + f->get_floats(key).size(); });
        quietly([&] { sink = sink + f->get_ints(key).size(); });
    }
    for (const TensorInfo& t : f->tensors()) {
        if (f->find_tensor(t.name) != &t) __builtin_trap();
        if (t.data < data || t.data + t.n_bytes > data + size) __builtin_trap();
        uint64_t sum = uint64_t(t.n_elements());
        for (uint64_t i = 0; i < t.n_bytes; ++i) sum += t.data[i];
        sink = sink + sum;
        if (pagoda::quant::is_codebook_type(t.type) && !t.shape.empty()) {
            float out[256];
            const auto& traits = type_traits(t.type);
            for (uint64_t b = 0; b + uint64_t(traits.type_size) <= t.n_bytes; b += uint64_t(traits.type_size)) {
                pagoda::quant::dequantize_row_codebook(t.type, t.data + b, out, traits.block_size);
                sink = sink + uint64_t(out[0] != out[0]);
            }
        }
    }
    quietly([&] { sink = sink + pagoda::quant::read_imatrix(*f).size(); });
    quietly([&] { sink = sink + uint64_t(pagoda::vision::read_vision_config(*f).n_image_tokens()); });
    quietly([&] {
        const std::string arch = f->get_string_or("general.architecture", "llama");
        const int64_t hidden = f->get_int_or(arch + ".embedding_length", 16);
        if (hidden < 1 || hidden > (1 << 16)) return;
        if (auto head = pagoda::model::ClassifierHead::from_gguf(*f, arch, hidden)) {
            const double score = head->score(std::vector<float>(size_t(hidden), 0.5f));
            sink = sink + uint64_t(score != score) + head->describe().size();
        }
    });
    return 0;
}
