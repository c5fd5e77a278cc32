"""FasterRCNN (Terra §5.1: Faster R-CNN on COCO): a backbone (its conv stages applied by a recursive
helper), a region proposal head scoring every feature cell, and a region head classifying the
proposals. A fetched tensor value decides a shape used later in the same step: the number of proposals
is clamp(int(sigmoid(scores).sum().item())), the host ranks the fetched scores (tolist) to pick that many
cells, and index_select gathers them. Mirrors programs/faster_rcnn.cpp."""
import time

import numpy as np

import terra
import terra.nn as nn
import terra.nn.functional as F

from ._common import LossLog, finish, loader, make_engine

FEATURE = "a fetched score sum decides the proposal count (a shape) used later in the step"

CLASSES = 3  # background + 2 object classes


def apply_stages(stages, x):
    """relu(stage(x)) for each stage, recursively (recursion inside a step)."""
    if not stages:
        return x
    return apply_stages(stages[1:], F.relu(stages[0](x)))


class FasterRCNN(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.c1 = nn.Conv2d(3, width, 3, 1, 1)
        self.c2 = nn.Conv2d(width, 2 * width, 3, 2, 1)
        self.c3 = nn.Conv2d(2 * width, 2 * width, 3, 2, 1)
        self.rpn_conv, self.rpn_obj = nn.Conv2d(2 * width, 2 * width, 3, 1, 1), nn.Conv2d(2 * width, 1, 1)
        self.roi_fc, self.roi_cls = nn.Linear(2 * width, 32), nn.Linear(32, CLASSES)

    def backbone(self, x):
        return apply_stages([self.c1, self.c2, self.c3], x)


def rcnn_batch(rng, n, s, g):
    """Images with squares; per cell: objectness (1 where an object covers the cell's centre) and class."""
    img = rng.normal(0, 0.2, (n, 3, s, s)).astype(np.float32)
    obj = np.zeros((n, 1, g, g), np.float32)
    cell_class = np.zeros((n * g * g,), np.int64)
    cell = s // g
    for i in range(n):
        for _ in range(int(rng.integers(1, 4))):
            c = int(rng.integers(0, CLASSES - 1))
            w = int(rng.integers(cell, 2 * cell + 1))
            x0, y0 = int(rng.integers(0, s - w + 1)), int(rng.integers(0, s - w + 1))
            img[i, c, y0:y0 + w, x0:x0 + w] += 1.0
            for y in range(y0, y0 + w):
                for x in range(x0, x0 + w):
                    if y % cell == cell // 2 and x % cell == cell // 2:
                        obj[i, 0, y // cell, x // cell] = 1.0
                        cell_class[(i * g + y // cell) * g + x // cell] = 1 + c
    return img, obj, cell_class


def run(mode="eager", steps=20, quick=False, seed=0, on_step=None):
    t0 = time.perf_counter()
    engine = make_engine(mode)
    terra.manual_seed(seed)
    rng = np.random.default_rng(seed)
    n, s, width, max_props = (2, 16, 16, 16) if quick else (4, 32, 32, 48)
    g, min_props = s // 4, 4
    raw = [rcnn_batch(rng, n, s, g) for _ in range(8)]
    data = loader([(img, obj) for img, obj, _ in raw])
    model = FasterRCNN(width)
    opt = terra.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    log = LossLog(on_step)
    for it in range(steps):
        with engine.step():
            x, objectness = next(data)
            cell_class = raw[it % len(raw)][2]
            feat = model.backbone(x)                                   # [N, C, g, g]
            scores = model.rpn_obj(F.relu(model.rpn_conv(feat)))       # [N, 1, g, g]
            rpn_loss = F.binary_cross_entropy_with_logits(scores, objectness)
            # The fetched value decides how many proposals the region head sees this step.
            probs = terra.sigmoid(scores).flatten()
            k = min(max(int(probs.sum().item()), min_props), max_props)
            p = probs.tolist()
            order = sorted(range(len(p)), key=lambda a: -p[a])[:k]   # stable, highest first
            labels = terra.tensor([int(cell_class[c]) for c in order])
            cells = feat.permute(0, 2, 3, 1).reshape(n * g * g, feat.shape[1])
            rois = terra.index_select(cells, 0, terra.tensor(order))  # [k, C]
            roi_logits = model.roi_cls(F.relu(model.roi_fc(rois)))
            loss = rpn_loss + F.cross_entropy(roi_logits, labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
            log.record(it, loss)
    return finish(engine, log, t0)
