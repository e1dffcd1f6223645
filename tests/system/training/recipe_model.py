"""The recipe test's model, data, parameter groups and recipes, shared by its driver and its workers.

A recipe as an ML engineer writes one for torch.optim: parameter groups with no weight decay on biases and
norms, an LR schedule stepped every step, loss scaling with a GradScaler-style skip, and an inf in one rank's
gradient at chosen steps (docs/training.md)."""
import math

import torch

import train_model

IN, HIDDEN, CLASSES = train_model.IN, 256, train_model.CLASSES
STEPS = 300
INF_STEPS = (40, 41, 150, 233)  # rank 1's gradient holds an inf at these steps
INF_RANK = 1
WARMUP = 30


def make_model():
    torch.manual_seed(0)  # every rank and both runs start from the same weights
    return torch.nn.Sequential(torch.nn.Linear(IN, HIDDEN), torch.nn.LayerNorm(HIDDEN), torch.nn.Tanh(),
                               torch.nn.Linear(HIDDEN, CLASSES))


dataset, batch = train_model.dataset, train_model.batch  # the training test's task and data order


def groups(model, decay):
    """The usual two groups: weight decay on the weight matrices, none on biases and norms."""
    with_decay = [p for n, p in model.named_parameters() if n.endswith("weight") and p.dim() == 2]
    without = [p for n, p in model.named_parameters() if not (n.endswith("weight") and p.dim() == 2)]
    return [{"params": with_decay, "weight_decay": decay}, {"params": without, "weight_decay": 0.0}]


def group_keys(model):
    """(name, elements) of the parameters in the groups' order: a PSOptimizer job's keys."""
    names = {id(p): n for n, p in model.named_parameters()}
    return [(names[id(p)], p.numel()) for g in groups(model, 0.0) for p in g["params"]]


def model_keys(model):
    """(name, elements) in the model's order: the DDP hook's keys."""
    return [(n, p.numel()) for n, p in model.named_parameters()]


# Each recipe: the torch optimizer class name, its arguments, the weight decay of the decay group, and the
# schedule built on an optimizer (torch.optim.lr_scheduler classes, stepped once per step).
def adamw_schedule(opt):
    warm = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=WARMUP)
    cosine = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=STEPS - WARMUP, eta_min=1e-5)
    return torch.optim.lr_scheduler.SequentialLR(opt, [warm, cosine], milestones=[WARMUP])


def multistep_schedule(opt):
    return torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[100, 200], gamma=0.1)


RECIPES = {
    "adamw-warmup-cosine": dict(optimizer="adamw", kwargs=dict(lr=3e-3, betas=(0.9, 0.95), eps=1e-8), decay=0.05,
                                schedule=adamw_schedule, job_optimizer=dict(kind="adam", adamw=True)),
    "sgd-nesterov-multistep": dict(optimizer="sgd", kwargs=dict(lr=0.05, momentum=0.9, nesterov=True), decay=1e-4,
                                   schedule=multistep_schedule, job_optimizer=dict(kind="nesterov")),
}
TORCH_CLASSES = {"adamw": torch.optim.AdamW, "sgd": torch.optim.SGD}


def loss_fn(out, y):
    return torch.nn.functional.cross_entropy(out, y)


def max_diff(a, b):
    return max(float((p - q).abs().max()) for p, q in zip(a.parameters(), b.parameters()))


def finite(model):
    return all(p.grad is None or bool(torch.isfinite(p.grad).all()) for p in model.parameters())


def poison(model, rank, step):
    """Rank INF_RANK's gradient gets an inf at INF_STEPS (as an fp16 overflow would put one there)."""
    if rank == INF_RANK and step in INF_STEPS:
        next(model.parameters()).grad.view(-1)[7] = math.inf
