"""Static design-property analysis: facts from Triton/Python (libcst) and CUDA C++ (tree-sitter), named checks."""
