"""d2kgrade: can LLM agents turn expert design guidance into efficient GPU kernels?

The trusted grading side. Importing it never imports torch or triton (a test proves it).
"""

__version__ = "0.1.0"
