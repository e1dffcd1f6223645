"""The model, data and optimizer settings shared by the training test's workers and its driver."""
import torch

IN, HIDDEN, CLASSES = 64, 256, 10
SAMPLES, BATCH = 8192, 32          # per-rank batch; every mode sees the same rows in the same order
LR, MOMENTUM = 0.05, 0.9


def make_model():
    torch.manual_seed(0)  # every rank and every mode starts from the same weights
    # Tanh, not ReLU: at a ReLU kink a last-bit rounding difference (fp32 sums in arrival order) can flip a
    # unit on or off and change a gradient by a whole unit's contribution; with a smooth activation the
    # runs being compared stay as close as their rounding, so the tolerances below mean something.
    return torch.nn.Sequential(
        torch.nn.Linear(IN, HIDDEN), torch.nn.Tanh(),
        torch.nn.Linear(HIDDEN, HIDDEN), torch.nn.Tanh(),
        torch.nn.Linear(HIDDEN, CLASSES))


def dataset():
    """A synthetic classification task: labels from a fixed random teacher network, plus label noise."""
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(SAMPLES, IN, generator=g)
    teacher = torch.randn(IN, CLASSES, generator=g)
    y = (x @ teacher + 0.5 * torch.randn(SAMPLES, CLASSES, generator=g)).argmax(dim=1)
    return x, y


def batch(x, y, step, rank, world):
    start = ((step * world + rank) * BATCH) % SAMPLES
    return x[start:start + BATCH], y[start:start + BATCH]


def key_list():
    """(name, elements) of every trainable parameter: the phub job's keys."""
    return [(name, p.numel()) for name, p in make_model().named_parameters() if p.requires_grad]
