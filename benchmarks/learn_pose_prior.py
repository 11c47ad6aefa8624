# SPDX-License-Identifier: GPL-3.0-or-later
"""Learn the fit's pose prior (inference_server/fit/pose_prior.json) from CMU mocap (ASF/AMC).

    python benchmarks/learn_pose_prior.py --data <folder with *.asf and *.amc> [--out PATH]

The data: the CMU Graphics Lab Motion Capture Database (mocap.cs.cmu.edu, NSF EIA-0196217);
its terms allow the learned parameters in a product, not redistributing the data, so only the
parameters are shipped. A public mirror of subjects 01-03 in ASF/AMC: github.com/cyun9601/
CMU-MOCAP-Data (data/CMU/asfamc/subjects). Each subject's .asf is its skeleton; each .amc next
to it a clip, read with that subject's skeleton.

Own parser and forward kinematics (numpy; the ASF/AMC conventions of the CMU files: a bone's
rotation is C * M(dof) * C^-1 in its parent's, C its "axis" Euler angles, XYZ order), then the
joints' positions become pose_prior.limb_features, and one Gaussian mixture per kind of limb
(full covariances, EM written here) is fitted to them.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# CMU bone whose END is each of pose_prior.FEATURE_JOINTS.
CMU_ENDS = {"shoulder": "clavicle", "elbow": "humerus", "wrist": "radius",
            "hip": "hipjoint", "knee": "femur", "ankle": "tibia"}


def _euler_xyz(angles_deg) -> np.ndarray:
    """Rz @ Ry @ Rx of XYZ Euler angles in degrees (the ASF "axis ... XYZ" and dof order)."""
    x, y, z = np.radians(np.asarray(angles_deg, np.float64))
    cx, sx, cy, sy, cz, sz = np.cos(x), np.sin(x), np.cos(y), np.sin(y), np.cos(z), np.sin(z)
    rx = np.array([[1, 0, 0], [0, cx, -sx], [0, sx, cx]])
    ry = np.array([[cy, 0, sy], [0, 1, 0], [-sy, 0, cy]])
    rz = np.array([[cz, -sz, 0], [sz, cz, 0], [0, 0, 1]])
    return rz @ ry @ rx


def parse_asf(text: str) -> dict:
    """{"bones": {name: {direction, length, axis (deg, XYZ), dof}}, "children": {name: [...]}}."""
    bones, children, section, cur = {}, {}, None, None
    for raw in text.splitlines():
        line = raw.split("#")[0].strip()
        if not line:
            continue
        if line.startswith(":"):
            section = line.split()[0]
            continue
        words = line.split()
        if section == ":bonedata":
            if words[0] == "begin":
                cur = {"dof": [], "axis": [0.0, 0.0, 0.0], "direction": [0.0, 0.0, 0.0], "length": 0.0}
            elif words[0] == "end":
                bones[cur["name"]] = cur
            elif words[0] == "name":
                cur["name"] = words[1]
            elif words[0] == "direction":
                cur["direction"] = [float(w) for w in words[1:4]]
            elif words[0] == "length":
                cur["length"] = float(words[1])
            elif words[0] == "axis":
                if words[4:5] not in ([], ["XYZ"]):
                    raise ValueError(f"axis order {words[4]} (only XYZ is read)")
                cur["axis"] = [float(w) for w in words[1:4]]
            elif words[0] == "dof":
                cur["dof"] = words[1:]
        elif section == ":hierarchy" and words[0] not in ("begin", "end"):
            children.setdefault(words[0], []).extend(words[1:])
    return {"bones": bones, "children": children}


def parse_amc(text: str) -> list[dict]:
    """Frames, each {bone: [values]} (root: TX TY TZ RX RY RZ)."""
    frames, cur = [], None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#:":
            continue
        words = line.split()
        if len(words) == 1 and words[0].isdigit():
            cur = {}
            frames.append(cur)
        elif cur is not None:
            cur[words[0]] = [float(w) for w in words[1:]]
    return frames


def joint_positions(skel: dict, frame: dict) -> dict:
    """Each bone's end position (world, the ASF's units) for one AMC frame: forward kinematics
    from the root (whose orientation is its RX RY RZ, XYZ order)."""
    root = frame.get("root", [0.0] * 6)
    out = {"root": np.asarray(root[:3], np.float64)}
    stack = [("root", _euler_xyz(root[3:6]), out["root"])]
    while stack:
        name, rot, pos = stack.pop()
        for child in skel["children"].get(name, []):
            b = skel["bones"][child]
            c = _euler_xyz(b["axis"])
            angles = dict(zip(b["dof"], frame.get(child, [])))
            m = _euler_xyz([angles.get("rx", 0.0), angles.get("ry", 0.0), angles.get("rz", 0.0)])
            r = rot @ c @ m @ c.T
            end = pos + b["length"] * (r @ np.asarray(b["direction"]))
            out[child] = end
            stack.append((child, r, end))
    return out


def feature_joints(ends: dict) -> np.ndarray:
    """[12,3] pose_prior.FEATURE_JOINTS from the bones' ends."""
    from inference_server.fit.pose_prior import FEATURE_JOINTS

    return np.stack([ends[("l" if n.startswith("left") else "r") + CMU_ENDS[n.split("_")[1]]]
                     for n in FEATURE_JOINTS])


def clip_joints(skel: dict, frames: list[dict], every: int) -> np.ndarray:
    return np.stack([feature_joints(joint_positions(skel, f)) for f in frames[::every]])


def read_folder(folder: Path, every: int) -> np.ndarray:
    """[N,12,3] joints of every clip under ``folder`` (each .amc read with the .asf beside it,
    the one whose name its own starts with when there are several), every ``every``-th frame."""
    out = []
    for amc in sorted(folder.rglob("*.amc")):
        asfs = sorted(amc.parent.glob("*.asf"))
        asf = next((a for a in asfs if amc.stem.startswith(a.stem)), asfs[0] if asfs else None)
        if asf is None:
            continue
        out.append(clip_joints(parse_asf(asf.read_text()), parse_amc(amc.read_text()), every))
    return np.concatenate(out)


def fit_gmm(x: np.ndarray, k: int, iterations: int = 200, reg: float = 1e-3, seed: int = 0) -> tuple:
    """(weights [K], means [K,D], covariances [K,D,D]): EM, full covariances, ``reg`` added to
    each diagonal (the features lie on spheres: flat along the radius), k-means++ start."""
    rng = np.random.default_rng(seed)
    n, d = x.shape
    centres = [x[rng.integers(n)]]
    for _ in range(k - 1):
        d2 = np.min([((x - c) ** 2).sum(1) for c in centres], 0)
        centres.append(x[rng.choice(n, p=d2 / d2.sum())])
    means = np.array(centres)
    covs = np.repeat((np.cov(x.T) + reg * np.eye(d))[None], k, 0)
    weights = np.full(k, 1.0 / k)
    prev = -np.inf
    for _ in range(iterations):
        logp = _log_densities(x, weights, means, covs)  # [N,K]
        top = logp.max(1, keepdims=True)
        ll = top[:, 0] + np.log(np.exp(logp - top).sum(1))
        resp = np.exp(logp - ll[:, None])
        nk = resp.sum(0) + 1e-9
        weights = nk / n
        means = (resp.T @ x) / nk[:, None]
        for j in range(k):
            dx = x - means[j]
            covs[j] = (resp[:, j, None] * dx).T @ dx / nk[j] + reg * np.eye(d)
        if ll.mean() - prev < 1e-6:
            break
        prev = ll.mean()
    return weights, means, covs


def _log_densities(x, weights, means, covs) -> np.ndarray:
    """[N,K] log(w_k N(x; mu_k, S_k))."""
    out = []
    for w, m, s in zip(weights, means, covs):
        chol = np.linalg.cholesky(s)
        z = np.linalg.solve(chol, (x - m).T)
        out.append(np.log(w) - 0.5 * (z * z).sum(0) - np.log(np.diag(chol)).sum() - 0.5 * len(m) * np.log(2 * np.pi))
    return np.stack(out, 1)


def rest_offset(features: np.ndarray, anny_rest: np.ndarray, within_deg: float = 15.0) -> np.ndarray:
    """[2,6] per kind (arm, leg): for the legs, anny's rest features less the mocap's own rest
    (the mean of its legs whose both bones hang within ``within_deg`` of the torso's down). The two rigs put
    their joints apart (anny's are its COCO regressor's, the mocap's the bones' ends: a standing
    thigh ~14 degrees apart), so the mocap is shifted onto anny's rig before the mixture is
    fitted: without it the prior turned a standing body's legs 14 degrees off anny's rest."""
    from inference_server.fit.pose_prior import KINDS

    out = [np.zeros(6)]  # arms: anny's rest holds them 37 degrees out, not hanging; a shift that
    # large would misplace every other arm pose (the offset is a shift of unit vectors, not a turn)
    for kind in ("leg",):
        rows = [i for i, kk in enumerate(KINDS) if kk == kind]
        x = np.concatenate([features[:, i] for i in rows])
        hanging = (x[:, 2] < -np.cos(np.radians(within_deg))) & (x[:, 5] < -np.cos(np.radians(within_deg)))
        out.append(anny_rest[rows].mean(0) - x[hanging].mean(0))
    return np.array(out)


def anny_rest_features() -> np.ndarray:
    """[4,6] the features of anny's neutral posture, average body (the fit's own joints)."""
    import torch

    from inference_server.fit.body_model import BodyModel
    from inference_server.fit.pose_prior import limb_features, FEATURE_JOINTS
    from inference_server.fit.correspondences import JOINT_NAMES
    from inference_server.fit.solver import BodyFitter

    body = BodyModel.load()
    with torch.no_grad():
        joints = body.skeleton(torch.full((1, 6), 0.5), BodyFitter(body).neutral[None]).joints[0]
    return limb_features(joints[[JOINT_NAMES.index(n) for n in FEATURE_JOINTS]].double()).numpy()


def prior_parameters(features: np.ndarray, k: int, reg: float = 0.01) -> dict:
    """The shipped arrays for features [N,4,6] (pose_prior.LIMBS): per kind (arm, leg) the
    mixture as pose_prior.PosePrior reads it, its log weights folding in the normalisers."""
    from inference_server.fit.pose_prior import KINDS

    means, prec_chol, log_norm, best = [], [], [], []
    for kind in ("arm", "leg"):
        x = np.concatenate([features[:, i] for i, kk in enumerate(KINDS) if kk == kind])
        w, mu, cov = fit_gmm(x, k, reg=reg)
        inv = np.linalg.inv(cov)
        lc = np.linalg.cholesky(inv)  # inv = L L^T: maha = |L^T d|^2 = |d^T L|^2
        ln = np.log(w) - 0.5 * np.linalg.slogdet(cov)[1] - 0.5 * x.shape[1] * np.log(2 * np.pi)
        means.append(mu), prec_chol.append(lc), log_norm.append(ln)
        # the best log-likelihood: the highest of the data's own
        logp = _log_densities(x, w, mu, cov)
        top = logp.max(1)
        best.append(np.max(top + np.log(np.exp(logp - top[:, None]).sum(1))))
    return {"means": np.array(means, np.float32), "prec_chol": np.array(prec_chol, np.float32),
            "log_norm": np.array(log_norm, np.float32), "best": np.array(best, np.float32)}


def main(argv=None) -> int:
    import torch

    from inference_server.fit.pose_prior import DATA, KINDS, limb_features, write_parameters

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="folder with the .asf/.amc files")
    ap.add_argument("--out", type=Path, default=DATA)
    ap.add_argument("--every", type=int, default=4, help="keep every N-th frame (120 fps clips)")
    ap.add_argument("--components", type=int, default=8)
    ap.add_argument("--reg", type=float, default=0.01, help="added to each covariance's diagonal")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    joints = read_folder(args.data, args.every)
    feats = limb_features(torch.as_tensor(joints)).numpy()
    offset = rest_offset(feats, anny_rest_features())
    feats = feats + offset[[("arm", "leg").index(k) for k in KINDS]][None]
    print("rest offsets (arm, leg):", offset.round(3).tolist())
    print(f"{len(joints)} frames ({time.perf_counter() - t0:.0f} s); fitting {args.components} components per limb kind")
    params = prior_parameters(feats, args.components, args.reg)
    write_parameters(args.out, {**params, "rest_offset": offset.astype(np.float32),
                                "frames": np.int64(len(joints)), "every": np.int64(args.every)})
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes, {time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
