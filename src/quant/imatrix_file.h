// Reads a llama.cpp importance matrix in its GGUF form (what `llama-imatrix` writes by default):
// metadata imatrix.datasets (strings), imatrix.chunk_count and imatrix.chunk_size (integers), and per
// weight tensor NAME two F32 tensors: NAME.in_sum2, shape [n_cols] or [n_cols, n_mat] (sums of the
// squared input activations of each column, per matrix of a stack of experts), and NAME.counts,
// n_mat values (how many activations were summed). A column's importance is in_sum2 / counts; a
// matrix with count 0 never saw input and gets importance 1 (as llama.cpp reads it). A stack of
// experts gets one vector: the sums over its matrices divided by the summed counts. Strict: a
// missing key, a sum without its counts (or the reverse), a wrong type or shape, a negative or
// non-finite value is an error naming the file and tensor. The legacy binary .dat format is refused.
#pragma once
#include <map>
#include <string>
#include <vector>

namespace pagoda::gguf {
class File;
}

namespace pagoda::quant {

// Tensor name -> per-column importance.
std::map<std::string, std::vector<float>> read_imatrix(const gguf::File& file);
std::map<std::string, std::vector<float>> read_imatrix_file(const std::string& path);

}  // namespace pagoda::quant
