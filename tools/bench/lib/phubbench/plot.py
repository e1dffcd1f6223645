"""PNG plots of benchmark results (matplotlib, headless)."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def _finish(fig, ax, title, ylabel, path, note):
    ax.set_title(title, fontsize=11)
    ax.set_ylabel(ylabel)
    ax.grid(axis="y", alpha=0.3)
    if note:
        fig.text(0.01, 0.01, note, fontsize=7, color="#555555")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def bars(path, title, ylabel, labels, series, note=""):
    """Grouped bars: `series` is [(name, [value per label]), ...]."""
    fig, ax = plt.subplots(figsize=(7, 4))
    n = len(series)
    width = 0.8 / max(n, 1)
    for i, (name, values) in enumerate(series):
        xs = [x + (i - (n - 1) / 2) * width for x in range(len(labels))]
        b = ax.bar(xs, values, width, label=name)
        ax.bar_label(b, fmt="%.2f", fontsize=8)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels)
    ax.legend(fontsize=8)
    return _finish(fig, ax, title, ylabel, path, note)


def lines(path, title, xlabel, ylabel, xs, series, limit=None, limit_label="", logx=False, note="", logy=False):
    """Lines over xs; `series` is [(name, [y per x]), ...]; an optional horizontal limit."""
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, ys in series:
        ax.plot(xs, ys, marker="o", label=name)
    if limit is not None:
        ax.axhline(limit, color="#aa3333", linestyle="--", label=limit_label)
    if logx:
        ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("log")
    ax.set_xticks(xs)
    ax.set_xticklabels([str(x) for x in xs])
    ax.set_xlabel(xlabel)
    ax.legend(fontsize=8)
    return _finish(fig, ax, title, ylabel, path, note)


def curves(path, title, xlabel, ylabel, series, note="", logy=False):
    """Lines each over its own xs; `series` is [(name, [x], [y]), ...]."""
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, xs, ys in series:
        ax.plot(xs, ys, label=name, linewidth=1.2)
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.legend(fontsize=8)
    return _finish(fig, ax, title, ylabel, path, note)
