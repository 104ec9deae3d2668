#include "backend/cpu/cpu_weight.h"

#include <sys/mman.h>
#include <unistd.h>

#include "backend/cpu/plan/kernel_plan.h"
#include "core/mapped_file.h"

namespace pagoda::backend::cpu {
namespace {

WeightView view_of(const MatrixSource& s) { return {s.type, s.data, s.rows, s.cols}; }

// A packed weight never reads its source again (unless the kernel method changes at run time, when
// the pages fault back in from the page cache): drop the file pages it touched while packing from
// this process, so a model does not count twice in resident memory. Whole pages inside each part
// only; the file mapping is read-only.
void release_source_pages(const PackedWeight& w) {
    if (!w.is_packed()) return;
    const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
    for (const auto& part : w.parts()) {
        const auto begin = reinterpret_cast<uintptr_t>(part.data);
        const uintptr_t bytes = part.bytes();
        const uintptr_t first = (begin + page - 1) / page * page, last = (begin + bytes) / page * page;
        if (last > first) (void)madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
    }
}

}  // namespace

CpuWeight::CpuWeight(std::vector<MatrixSource> parts, WeightUse use, const PlanSettings& plan)
    : Weight(std::move(parts)) {
    for (const auto& p : this->parts()) views_.push_back(view_of(p));
    if (use == WeightUse::embedding) {  // read by rows only: stays in the file mapping,
        for (const auto& v : views_) populate_pages(v.data, size_t(v.bytes()));  // faulted in once
        return;
    }
    bool file_mapped = true;
    for (const auto& p : this->parts()) file_mapped = file_mapped && p.file_mapped;
    // Parts of one type are stacked into one packed weight when a packed kernel takes it: one
    // pass, the input quantised once, one parallel region. Otherwise (types differ, e.g. Q4_K_M's
    // Q6_K attn_v, or no packed kernel) one packed weight per part.
    bool same = true;
    for (const auto& v : views_) same = same && v.type == views_[0].type;
    // The plan's method decides the layout (kernel_plan.h): a quantised type planned for
    // dequant_fma keeps the file's view rather than panels it would never read; F16/BF16 pack
    // bf16 panels only under bf16_dot (the scope makes packing see the planned float method).
    if (views_.size() > 1 && same) {
        const KernelChoice choice = kernel_choice(plan, views_[0].type, 1);
        const ScopedKernelChoice scope(choice);
        if (choice.method == PathMethod::dequant_fma) {
            packed_.push_back(keep_views(views_));
            return;
        }
        PackedWeight stacked = pack_weights(views_);
        if (stacked.is_packed()) {
            if (file_mapped) release_source_pages(stacked);
            packed_.push_back(std::move(stacked));
            return;
        }
    }
    for (const auto& v : views_) {
        const KernelChoice choice = kernel_choice(plan, v.type, 1);
        const ScopedKernelChoice scope(choice);
        if (choice.method == PathMethod::dequant_fma) {
            packed_.push_back(keep_views(std::span(&v, 1)));
            continue;
        }
        packed_.push_back(pack_weight(v));
        if (file_mapped) release_source_pages(packed_.back());
    }
}

}  // namespace pagoda::backend::cpu
