"""YOLOv3 (Terra §5.1: YOLOv3 on VOC2012): a small darknet-style backbone, a coarse head, and a fine
head fed by nearest upsampling of the coarse features concatenated with an earlier route; a detection
loss (objectness BCE, box regression through `where`, class cross-entropy) per scale, collected in a
dict on the host. Generated images hold coloured squares; their class is the colour. Mirrors
programs/yolov3.cpp."""
import time

import numpy as np

import terra
import terra.nn as nn
import terra.nn.functional as F

from ._common import LossLog, finish, make_engine

FEATURE = "multi-scale detector: upsample + cat route, where-masked box loss, per-scale losses in a dict"

CLASSES = 2
OUT = 5 + CLASSES  # objectness, 4 box values, class logits


class ConvBN(nn.Module):
    """conv + BatchNorm + leaky relu (darknet's basic unit)."""

    def __init__(self, cin, cout, k, stride):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, stride, k // 2, bias=False)
        self.bn = nn.BatchNorm2d(cout)

    def forward(self, x):
        return F.leaky_relu(self.bn(self.conv(x)), 0.1)


class Yolo(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.c2, self.c3, self.c4 = ConvBN(3, 16, 3, 1), ConvBN(16, 32, 3, 2), ConvBN(32, 32, 3, 2), \
            ConvBN(32, 64, 3, 2)
        self.head1, self.out1 = ConvBN(64, 64, 3, 1), nn.Conv2d(64, OUT, 1)
        self.lateral, self.head2, self.out2 = ConvBN(64, 32, 1, 1), ConvBN(64, 32, 3, 1), nn.Conv2d(32, OUT, 1)

    def forward(self, x):
        """x [N, 3, S, S] -> {"coarse": [N, OUT, S/8, S/8], "fine": [N, OUT, S/4, S/4]}."""
        route = self.c3(self.c2(self.c1(x)))
        deep = self.c4(route)
        coarse = self.out1(self.head1(deep))
        up = F.interpolate(self.lateral(deep), scale_factor=2.0, mode="nearest")
        fine = self.out2(self.head2(terra.cat([up, route], 1)))
        return {"coarse": coarse, "fine": fine}


def yolo_batch(rng, n, s, grids):
    """Image plus, per scale with a g x g grid: objectness, box targets, box mask, cell classes."""
    img = rng.normal(0, 0.1, (n, 3, s, s)).astype(np.float32)
    scales = [dict(obj=np.zeros((n, 1, g, g), np.float32), box=np.zeros((n, 4, g, g), np.float32),
                   mask=np.zeros((n, 4, g, g), bool), cls=np.full((n * g * g,), -100, np.int64)) for g in grids]
    for i in range(n):
        for _ in range(int(rng.integers(1, 3))):
            c = int(rng.integers(0, CLASSES))
            w, h = int(rng.integers(s // 8 + 1, s // 3 + 1)), int(rng.integers(s // 8 + 1, s // 3 + 1))
            x0, y0 = int(rng.integers(0, s - w + 1)), int(rng.integers(0, s - h + 1))
            img[i, c, y0:y0 + h, x0:x0 + w] += 1.0  # class colour
            img[i, 2, y0:y0 + h, x0:x0 + w] += 0.5  # shared brightness
            cx, cy = (x0 + w / 2) / s, (y0 + h / 2) / s
            for g, t in zip(grids, scales):
                gx, gy = min(g - 1, int(cx * g)), min(g - 1, int(cy * g))
                t["obj"][i, 0, gy, gx] = 1.0
                t["cls"][(i * g + gy) * g + gx] = c
                t["box"][i, :, gy, gx] = [cx * g - gx, cy * g - gy, w / s, h / s]
                t["mask"][i, :, gy, gx] = True
    for t in scales:
        t["cells"] = int((t["obj"] > 0.5).sum())
    return img, scales


def scale_loss(pred, t):
    """pred [N, OUT, g, g] against one scale's targets (terra tensors, plus the host's cell count)."""
    n, g = pred.shape[0], pred.shape[2]
    obj, box, cls = pred[:, 0:1], pred[:, 1:5], pred[:, 5:OUT]
    obj_loss = F.binary_cross_entropy_with_logits(obj, t["obj"])
    diff = terra.sigmoid(box) - t["box"]
    box_loss = terra.where(t["mask"], diff * diff, 0.0).sum() / float(max(1, t["cells"]))
    cls_loss = F.cross_entropy(cls.permute(0, 2, 3, 1).reshape(n * g * g, CLASSES), t["cls"])
    return obj_loss * 4.0 + box_loss + cls_loss


def batches(raw):
    """A generator of (image, per-scale target dicts) as terra tensors."""
    i = 0
    while True:
        img, scales = raw[i % len(raw)]
        yield terra.from_numpy(img), [{k: terra.from_numpy(v) if isinstance(v, np.ndarray) else v
                                       for k, v in t.items()} for t in scales]
        i += 1


def run(mode="eager", steps=20, quick=False, seed=0, on_step=None):
    t0 = time.perf_counter()
    engine = make_engine(mode)
    terra.manual_seed(seed)
    rng = np.random.default_rng(seed)
    n, s = (8, 16) if quick else (16, 32)
    data = batches([yolo_batch(rng, n, s, [s // 8, s // 4]) for _ in range(8)])
    model = Yolo()
    opt = terra.optim.Adam(model.parameters(), lr=2e-3)
    log = LossLog(on_step)
    for it in range(steps):
        with engine.step():
            x, targets = next(data)
            preds = model(x)
            parts = {}  # per-scale losses, a dict filled on the host inside the step
            for (name, pred), t in zip(preds.items(), targets):
                parts[name] = scale_loss(pred, t)
            loss = parts["coarse"] + parts["fine"]
            opt.zero_grad()
            loss.backward()
            opt.step()
            log.record(it, loss)
    return finish(engine, log, t0)
