"""mrc-twin: a digital twin of MRC multi-plane SRv6 AI-training fabrics.

The pipeline, one direction (see twin.lab for the function that runs it):

    spec -> model -> plan -> data plane -> render -> runtime -> configure -> routing
         -> verify

Everything up to `render` is pure and needs no root.
"""

__version__ = "0.1.0"
