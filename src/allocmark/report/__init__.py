"""Report outputs, one module per format, all reading one analyze.Comparison."""
