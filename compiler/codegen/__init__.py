"""PTX code generation for sm_90a."""
