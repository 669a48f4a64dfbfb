#include "plan/plan.h"

namespace memlane {

const char* op_type_name(OpType t) {
  switch (t) {
    case OpType::kConv: return "Conv";
    case OpType::kGemm: return "Gemm";
    case OpType::kMatMul: return "MatMul";
    case OpType::kAdd: return "Add";
    case OpType::kSub: return "Sub";
    case OpType::kMul: return "Mul";
    case OpType::kDiv: return "Div";
    case OpType::kRelu: return "Relu";
    case OpType::kLeakyRelu: return "LeakyRelu";
    case OpType::kSigmoid: return "Sigmoid";
    case OpType::kTanh: return "Tanh";
    case OpType::kErf: return "Erf";
    case OpType::kGelu: return "Gelu";
    case OpType::kMaxPool: return "MaxPool";
    case OpType::kAveragePool: return "AveragePool";
    case OpType::kGlobalAveragePool: return "GlobalAveragePool";
    case OpType::kFlatten: return "Flatten";
    case OpType::kReshape: return "Reshape";
    case OpType::kTranspose: return "Transpose";
    case OpType::kConcat: return "Concat";
    case OpType::kSoftmax: return "Softmax";
    case OpType::kClip: return "Clip";
    case OpType::kHardSigmoid: return "HardSigmoid";
    case OpType::kHardSwish: return "HardSwish";
    case OpType::kSiLU: return "SiLU";
    case OpType::kPad: return "Pad";
    case OpType::kSplit: return "Split";
    case OpType::kLSTM: return "LSTM";
  }
  return "?";
}

}  // namespace memlane
