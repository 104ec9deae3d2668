// The engine drives compute through model::StepModel (model/step_model.h): info() + forward(Batch).
// These aliases keep the engine's own name for it.
#pragma once
#include "model/step_model.h"

namespace pagoda::engine {

using StepModel = model::StepModel;
using StepModelInfo = model::StepModelInfo;

}  // namespace pagoda::engine
