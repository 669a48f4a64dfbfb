"""The real-architecture zoo: torchvision classifiers, transformers models and torch.nn
sequence models with random weights, exported to ONNX with either torch exporter.

`python -m memlane_worker.realzoo --help` for the CLI; docs/zoo.md for the list. Importing
this package is cheap; `registry.models()` and `export.export()` import torch.
"""
