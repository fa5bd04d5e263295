# expect: reference_access
# Subclasses the reference and leaves its forward in place.
from op import Model


class ModelNew(Model):
    pass
