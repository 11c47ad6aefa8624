# SPDX-License-Identifier: GPL-3.0-or-later
"""Learn the fit's 2D-to-3D lifting network (inference_server/fit/lifting.json) from CMU mocap.

    python benchmarks/learn_lifting.py --data <folder with *.asf and *.amc> [--out PATH]
        [--check-maps DIR --realdata DIR]

The data: the CMU Graphics Lab Motion Capture Database (mocap.cs.cmu.edu, NSF EIA-0196217), read
with learn_pose_prior.py's own ASF/AMC parser; only the weights are shipped (its terms allow the
learned parameters in a product, not the data). Each step draws mocap frames and looks at each
through a random camera (any side of the body, from 15 degrees below to 50 above, 1.2 to 6.2
body heights away, aimed at the hips, the view mirrored half the time), projects its 12 limb
joints, adds noise to the 2D (up to 12 % of their spread, as far apart as a real backend's
keypoints and the mocap's joint centres), and learns the camera-frame 3D back (lifting.py's
conventions). 2-4 min on the 2-core VM.

``--check-maps`` scores the learned network on bench_real.py's saved maps (``--save-maps`` of a
run with the 3D sets): PA-MPJPE of the lifted joints, of the maps' own ``keypoints_3d`` and of
the two blended as observations.py blends them, per frame, and of the network given the label's
own 2D (the true joints projected: the lifting's worth once the 2D is right).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from inference_server.fit import lifting  # noqa: E402

PITCH_DEG = (-15.0, 50.0)  # the camera's elevation: below the hips to well above
DISTANCE = (1.2, 6.2)  # body heights
NOISE = 0.06  # the largest 2D noise's standard deviation, x the joints' spread (drawn 0..2x / 2)


def mocap_joints(folder: Path, every: int) -> np.ndarray:
    """[N,12,3] lifting.LIFT_JOINTS of every frame kept, the mocap's axes (y up), hips at 0."""
    import learn_pose_prior as lp
    from inference_server.fit.pose_prior import FEATURE_JOINTS

    j = lp.read_folder(folder, every)[:, [FEATURE_JOINTS.index(n) for n in lifting.LIFT_JOINTS]]
    return j - j[:, list(lifting.HIPS)].mean(1, keepdims=True)


def _rotation(axis: int, angle):
    import torch

    c, s = torch.cos(angle), torch.sin(angle)
    o, z = torch.ones_like(angle), torch.zeros_like(angle)
    rows = {0: [o, z, z, z, c, -s, z, s, c], 1: [c, z, s, z, o, z, -s, z, c], 2: [c, -s, z, s, c, z, z, z, o]}[axis]
    return torch.stack(rows, -1).reshape(*angle.shape, 3, 3)


def views(joints, height: float, generator, noise: float = NOISE):
    """(inputs [N,24], targets [N,36]) of mocap ``joints`` [N,12,3] (torch) seen by random cameras."""
    import torch

    n = len(joints)
    rnd = lambda *s: torch.rand(*s, generator=generator)  # noqa: E731
    yaw = rnd(n) * 2 * np.pi
    pitch = torch.deg2rad(PITCH_DEG[0] + rnd(n) * (PITCH_DEG[1] - PITCH_DEG[0]))
    roll = torch.deg2rad(torch.randn(n, generator=generator) * 3)
    turn = _rotation(2, roll) @ _rotation(0, pitch) @ _rotation(1, yaw)
    # the mocap's y up, z towards the viewer -> the camera's y down, z away: a half turn about x
    cam = (joints @ turn.transpose(1, 2)) * torch.tensor([1.0, -1.0, -1.0])
    dist = height * (DISTANCE[0] + rnd(n) * (DISTANCE[1] - DISTANCE[0]))
    uv = cam[..., :2] / (cam[..., 2:] + dist[:, None, None])
    flip = rnd(n) < 0.5
    mirror = list(lifting.MIRROR)
    uv[flip] = uv[flip][:, mirror] * torch.tensor([-1.0, 1.0])
    cam[flip] = cam[flip][:, mirror] * torch.tensor([-1.0, 1.0, 1.0])
    x = torch.as_tensor(lifting.normalize_2d(uv.numpy()))
    x = x + torch.randn(x.shape, generator=generator) * noise * 2 * rnd(n, 1)
    y = torch.as_tensor(lifting.unit_spread(cam.numpy()))
    return x.float(), y.reshape(n, -1).float()


def network(hidden: int, blocks: int):
    import torch.nn as nn

    def layer(a, b):
        return nn.Sequential(nn.Linear(a, b), nn.LayerNorm(b), nn.ReLU(), nn.Dropout(0.2))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.f = nn.Sequential(layer(hidden, hidden), layer(hidden, hidden))

        def forward(self, x):
            return x + self.f(x)

    n_in, n_out = 2 * len(lifting.LIFT_JOINTS), 3 * len(lifting.LIFT_JOINTS)
    return nn.Sequential(layer(n_in, hidden), *[Block() for _ in range(blocks)], nn.Linear(hidden, n_out))


def arrays_of(net, blocks: int) -> dict:
    """The network's weights by lifting.Lifter's names, float16."""
    def lay(seq, name):
        lin, norm = seq[0], seq[1]
        return {f"{name}.w": lin.weight, f"{name}.b": lin.bias, f"{name}.g": norm.weight, f"{name}.beta": norm.bias}

    out = lay(net[0], "in")
    for i in range(blocks):
        out.update(lay(net[1 + i].f[0], f"block{i}.0"))
        out.update(lay(net[1 + i].f[1], f"block{i}.1"))
    out.update({"out.w": net[-1].weight, "out.b": net[-1].bias})
    arrays = {k: v.detach().numpy().astype(np.float16) for k, v in out.items()}
    arrays["blocks"] = np.array(blocks, np.int32)
    return arrays


def train(joints: np.ndarray, hidden: int, blocks: int, epochs: int, seed: int, log=print):
    import torch

    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    height = float(np.percentile(np.ptp(joints[..., 1], 1), 90))
    data = torch.as_tensor(joints, dtype=torch.float32)
    net = network(hidden, blocks)
    opt = torch.optim.AdamW(net.parameters(), 1e-3, weight_decay=1e-4)
    batch = 256
    steps = epochs * len(data) // batch
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, 2e-3, total_steps=steps)
    t0 = time.perf_counter()
    for step in range(steps):
        x, y = views(data[torch.randint(0, len(data), (batch,), generator=gen)], height, gen)
        loss = (net(x) - y).reshape(batch, -1, 3).norm(dim=-1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if step % max(1, steps // 10) == 0 or step == steps - 1:
            log(f"step {step}/{steps}  loss {loss.item():.4f}  {time.perf_counter() - t0:.0f} s")
    return net.eval()


def check_maps(maps: Path, realdata: Path, lifter) -> list[dict]:
    """Per 3D frame of bench_real's saved ``maps``: PA-MPJPE (mm) of the lifted joints, of the
    maps' keypoints_3d and of their blend (observations.LIFT_SHARE)."""
    import bench_real as br
    from inference_server.fit.observations import LIFT_SHARE

    rows = []
    root = br.data_root(realdata)
    for loader in br._LOADERS_3D.values():
        for photo in loader(root):
            files = {"maps": maps / f"{br.built_name(photo)}.npz", "joints": maps / "-"}
            if not files["maps"].is_file():
                continue
            out = br.read_outputs(photo, {"files": files})
            near = br.backend_on_label(out, photo.labels[0])
            if near is None:
                continue
            xy = np.array([near["points"].get(n, (np.nan, np.nan)) for n in lifting.LIFT_JOINTS])
            lifted = lifting.lift(xy, out["intrinsics"], lifter)
            if lifted is None:
                continue
            both = lifting.blend(near["joints3d"], lifted, LIFT_SHARE)
            # the same network given the label's own 2D (the true joints projected): what the
            # lifting alone is worth once the 2D is right
            from_label = lifting.lift(photo.truth2d, out["intrinsics"], lifter)
            rows.append({"frame": photo.key, "lifted": 1000 * br.pa_mpjpe(lifted, photo.truth3d),
                         "input": 1000 * br.pa_mpjpe(near["joints3d"], photo.truth3d),
                         "blend": 1000 * br.pa_mpjpe(both, photo.truth3d),
                         "from_label": 1000 * br.pa_mpjpe(from_label, photo.truth3d)})
    return rows


def main(argv=None) -> int:
    import torch

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, help="folder with the .asf/.amc files")
    ap.add_argument("--out", type=Path, default=lifting.DATA)
    ap.add_argument("--every", type=int, default=2, help="keep every N-th frame (120 fps clips)")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--blocks", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--check-maps", type=Path, help="bench_real.py's --out folder (saved maps)")
    ap.add_argument("--realdata", type=Path, help="bench_real.py's --data folder")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.data is not None:
        t0 = time.perf_counter()
        joints = mocap_joints(args.data, args.every)
        print(f"{len(joints)} mocap frames ({time.perf_counter() - t0:.0f} s)")
        net = train(joints, args.hidden, args.blocks, args.epochs, args.seed)
        lifting.write_arrays(args.out, arrays_of(net, args.blocks))
        print(f"wrote {args.out} ({args.out.stat().st_size} bytes)")
    if args.check_maps is not None:
        if args.realdata is None:
            ap.error("--check-maps needs --realdata")
        rows = check_maps(args.check_maps, args.realdata, lifting.Lifter(lifting.read_arrays(args.out)))
        print(f"{'frame':48s} {'lifted':>7s} {'input':>7s} {'blend':>7s} {'label 2D':>9s}   (PA-MPJPE mm)")
        for r in rows:
            print(f"{r['frame']:48s} {r['lifted']:7.1f} {r['input']:7.1f} {r['blend']:7.1f} {r['from_label']:9.1f}")
        if rows:
            m = {k: np.mean([r[k] for r in rows]) for k in ("lifted", "input", "blend", "from_label")}
            print(f"{'mean of ' + str(len(rows)) + ' frames':48s} {m['lifted']:7.1f} {m['input']:7.1f} {m['blend']:7.1f}"
                  f" {m['from_label']:9.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
