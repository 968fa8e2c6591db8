"""What deft.vision's model families share: refusing pretrained weights, named constructors."""


def no_pretrained(name, pretrained):
    """deft downloads nothing: a model comes with random initialisation only."""
    if pretrained:
        raise ValueError(
            f"deft.vision.{name}: pretrained weights are not available (deft downloads "
            f"nothing); build the model with pretrained=False and load weights with "
            f"load_parameters() from a .params file, e.g. one written by MXNet's "
            f"save_parameters for the same model")


def constructor(name, doc, get, *args, **fixed):
    """A model's named constructor, as Gluon's resnet18_v1(**kwargs): get(*args, **kwargs),
    with the keyword arguments in `fixed` set whatever the caller gives."""
    def build(**kwargs):
        return get(*args, **{**kwargs, **fixed})
    build.__name__ = build.__qualname__ = name
    build.__module__, build.__doc__ = get.__module__, doc
    return build
