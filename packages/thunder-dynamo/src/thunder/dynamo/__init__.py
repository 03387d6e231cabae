"""thunder.dynamo: ThunderCompiler, the ``torch.compile`` backend that hands FX subgraphs to thunder.

A placeholder: the backend is filled in by a later change.
"""
