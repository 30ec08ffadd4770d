"""Stage 6: the pass pipeline (IR -> IR rewrites and the analyses they ask), run between autodiff and
the emitters with explicit options.  `pipeline.py` lists the passes (run_pipeline), `options.py` the
options (PipelineOptions, CudaOptions).  Nothing is imported here: the options are imported on a warm
start (the front-end cache keys by them), the passes only when something is compiled."""
