"""Terra's ten evaluation programs (paper §5.1) in Python, written as a PyTorch user writes them on
`import terra`, each mirroring programs/<name>.cpp (same model structure, sizes, optimizer and step
structure) and keeping what made it hard in the paper.

    from terra import programs
    losses, stats, wall_s, extra = programs.run("gpt2", mode="coexec", steps=20, quick=True)

Every program module has FEATURE (one line) and run(mode, steps, quick, seed, on_step) -> Result:
mode is "eager" | "lazy" | "coexec" or a terra.Engine; Result.losses holds every step's loss as a
Python float, Result.stats the Engine's stats() after the run. Losses must be identical in every mode.
"""
import importlib

from ._common import Result  # noqa: F401

# The paper's order (Terra §5.1), as terra-bench prints them.
NAMES = ["resnet", "bert_qa", "yolov3", "dcgan", "gpt2", "bert_cls", "dropblock", "sdpoint", "faster_rcnn",
         "music_transformer"]

# Programs whose path through the step depends on data or on host randomness: co-execution may trace
# them more than a few times (the others must settle within a few traces).
DATA_DEPENDENT_PATHS = {"dropblock", "sdpoint", "faster_rcnn"}


def get(name):
    """The program's module (has FEATURE and run)."""
    if name not in NAMES:
        raise ValueError(f"[terra.programs] unknown program {name!r}; known: {', '.join(NAMES)}")
    return importlib.import_module(f"{__name__}.{name}")


def run(name, mode="eager", steps=20, quick=False, seed=0, on_step=None):
    return get(name).run(mode=mode, steps=steps, quick=quick, seed=seed, on_step=on_step)


def features():
    return {n: get(n).FEATURE for n in NAMES}
