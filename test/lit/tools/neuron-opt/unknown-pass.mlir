// A misspelled pass name, an unknown pass option or a malformed pipeline is a one-line usage error naming what
// is wrong (and for a pass name the closest known ones), with a nonzero exit code; never a Python traceback.
// RUN: not neuron-opt %s -p torch-canonicalise 2>&1 | filecheck %s --check-prefix=NAME
// RUN: not neuron-opt %s -p 'cse,neuron-pipline{until=tile}' 2>&1 | filecheck %s --check-prefix=PIPELINE
// RUN: not neuron-opt %s -p 'neuron-pipeline{untl=tile}' 2>&1 | filecheck %s --check-prefix=OPTION
// RUN: not neuron-opt %s -p 'neuron-pipeline{until=tile' 2>&1 | filecheck %s --check-prefix=SYNTAX
// NAME: neuron-opt: error: unknown pass 'torch-canonicalise' (closest known: torch-canonicalize, {{.*}})
// NAME-NOT: Traceback
// PIPELINE: neuron-opt: error: unknown pass 'neuron-pipline' (closest known: neuron-pipeline,
// OPTION: neuron-opt: error: pass 'neuron-pipeline': Provided arguments ["untl"] not found in expected arguments ["until"]
// SYNTAX: neuron-opt: error: malformed pass pipeline: Malformed pass arguments, expected either a space or `}` here
// SYNTAX-NOT: Traceback
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  func.return %x : tensor<4xf32>
}
