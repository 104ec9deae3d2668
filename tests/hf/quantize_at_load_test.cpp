// --quantize TYPE at load (model::open_model_file) is `pagoda quantize` without the file: the same
// tensors byte for byte and the same logits, for a GGUF and for a Hugging Face folder; an already
// quantised model and an unknown type are refused by name.
#include <cstring>
#include <gtest/gtest.h>

#include "core/error.h"
#include "core/thread_pool.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "model/model_file.h"
#include "model/open_step_model.h"
#include "model/random_model.h"
#include "model/sequence_runner.h"
#include "quant/quantize_model.h"

namespace pagoda::model {
namespace {

std::vector<float> logits(std::shared_ptr<const gguf::File> f) {
    auto m = open_step_model(f, {.threads = 2, .kv = {.block_size = 4, .dtype = kv::KvDtype::f32}, .tokens_wanted = 32});
    SequenceRunner r(*m, false);
    return r.prefill(0, std::vector<int32_t>{3, 50, 7, 260, 1}, 64, true);
}

TEST(QuantizeAtLoad, SameAsQuantizeToAFile) {
    RandomModelSpec s;
    s.n_layers = 2; s.dim = 64; s.n_heads = 4; s.n_kv_heads = 2; s.ffn_dim = 128; s.vocab_size = 300; s.seed = 3;
    const std::string src = test::temp_path("qload.gguf"), dir = test::temp_path("qload-hf");
    write_random_model(s, nullptr, src);
    write_random_model_hf(s, dir);
    for (const std::string type : {"q8_0", "q4_k_m"}) {
        SCOPED_TRACE(type);
        const std::string out = test::temp_path("qload-" + type + ".gguf");
        ThreadPool pool(2);
        quant::QuantizeRequest req;
        req.input = src;
        req.output = out;
        req.target = type;
        quant::quantize_model(req, pool);
        auto file = open_model_file(out);
        auto upper = type;
        for (char& c : upper) c = char(std::toupper(c));
        for (const std::string& path : {src, dir}) {
            auto loaded = open_model_file(path, {.quantize = upper, .threads = 2});
            for (const auto& t : file->tensors()) {
                const auto* v = loaded->find_tensor(t.name);
                ASSERT_NE(v, nullptr) << t.name;
                EXPECT_EQ(v->type, t.type) << t.name;
                ASSERT_EQ(v->n_bytes, t.n_bytes) << t.name;
                EXPECT_EQ(std::memcmp(v->data, t.data, t.n_bytes), 0) << t.name;
            }
            const auto a = logits(file), b = logits(loaded);
            ASSERT_EQ(a.size(), b.size());
            EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << path;
        }
        EXPECT_NE(file->find_tensor("blk.0.attn_q.weight")->type, gguf::GgmlType::F32);
    }
    try {
        open_model_file(test::temp_path("qload-q8_0.gguf"), {.quantize = "q4_0"});
        FAIL();
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("is already quantised"), std::string::npos) << e.what();
    }
    try {
        open_model_file(src, {.quantize = "q3_z"});
        FAIL();
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("unknown quantisation type 'q3_z'"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace pagoda::model
