# SPDX-License-Identifier: GPL-3.0-or-later
"""A minimal independent .glb reader for tests: JSON, accessors, node transforms, skinning, camera.

Deliberately not Blender's importer, so the exported file is checked the way other engines read it.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
from repo_paths import REPO, SUPPORT

_COMPONENT = {5120: np.int8, 5121: np.uint8, 5122: np.int16, 5123: np.uint16, 5125: np.uint32, 5126: np.float32}
_WIDTH = {"SCALAR": 1, "VEC2": 2, "VEC3": 3, "VEC4": 4, "MAT4": 16}


class Glb:
    def __init__(self, path: str | Path):
        data = Path(path).read_bytes()
        magic, version, length = struct.unpack_from("<4sII", data, 0)
        assert magic == b"glTF" and version == 2 and length == len(data), "not a glTF 2 binary"
        offset, self.json, self.bin = 12, None, b""
        while offset < length:
            size, kind = struct.unpack_from("<I4s", data, offset)
            chunk = data[offset + 8: offset + 8 + size]
            if kind == b"JSON":
                self.json = json.loads(chunk)
            elif kind == b"BIN\x00":
                self.bin = chunk
            offset += 8 + size

    def accessor(self, index: int) -> np.ndarray:
        acc = self.json["accessors"][index]
        if "bufferView" not in acc:  # a sparse accessor over zeros (Blender's shape keys)
            return self._sparse(acc)
        view = self.json["bufferViews"][acc["bufferView"]]
        dtype = np.dtype(_COMPONENT[acc["componentType"]])
        width = _WIDTH[acc["type"]]
        start = view.get("byteOffset", 0) + acc.get("byteOffset", 0)
        stride = view.get("byteStride", dtype.itemsize * width)
        raw = np.frombuffer(self.bin, np.uint8, count=stride * (acc["count"] - 1) + dtype.itemsize * width,
                            offset=start)
        rows = np.lib.stride_tricks.as_strided(raw, (acc["count"], dtype.itemsize * width), (stride, 1))
        out = np.ascontiguousarray(rows).view(dtype).reshape(acc["count"], width)
        if acc.get("normalized"):
            out = out.astype(np.float64) / np.iinfo(dtype).max
        return out.reshape(acc["count"], 4, 4).transpose(0, 2, 1) if acc["type"] == "MAT4" else out

    def _raw(self, view_index: int, offset: int, dtype, count: int, width: int) -> np.ndarray:
        view = self.json["bufferViews"][view_index]
        start = view.get("byteOffset", 0) + offset
        return np.frombuffer(self.bin, dtype, count=count * width, offset=start).reshape(count, width)

    def _sparse(self, acc) -> np.ndarray:
        """A sparse accessor without a base view: zeros, with ``count`` rows replaced."""
        width = _WIDTH[acc["type"]]
        out = np.zeros((acc["count"], width), np.dtype(_COMPONENT[acc["componentType"]]))
        sp = acc.get("sparse")
        if sp:
            idx = self._raw(sp["indices"]["bufferView"], sp["indices"].get("byteOffset", 0),
                            np.dtype(_COMPONENT[sp["indices"]["componentType"]]), sp["count"], 1)[:, 0]
            out[idx.astype(np.int64)] = self._raw(sp["values"]["bufferView"], sp["values"].get("byteOffset", 0),
                                                  out.dtype, sp["count"], width)
        return out

    def world_matrices(self) -> list[np.ndarray]:
        nodes = self.json["nodes"]
        parent = {c: i for i, n in enumerate(nodes) for c in n.get("children", [])}
        cache: dict[int, np.ndarray] = {}

        def world(i):
            if i not in cache:
                local = _local(nodes[i])
                cache[i] = world(parent[i]) @ local if i in parent else local
            return cache[i]

        return [world(i) for i in range(len(nodes))]

    def skinned_primitives(self, node_index: int):
        """[(positions world [N,3], texcoord [N,2])] of a mesh node, skinning applied at rest."""
        node = self.json["nodes"][node_index]
        worlds = self.world_matrices()
        out = []
        for prim in self.json["meshes"][node["mesh"]]["primitives"]:
            attrs = prim["attributes"]
            pos = self.accessor(attrs["POSITION"]).astype(np.float64)
            uv = self.accessor(attrs["TEXCOORD_0"]).astype(np.float64)
            hom = np.c_[pos, np.ones(len(pos))]
            if "skin" in node:
                skin = self.json["skins"][node["skin"]]
                ibm = self.accessor(skin["inverseBindMatrices"])
                joint_mats = np.stack([worlds[j] for j in skin["joints"]]) @ ibm
                joints = self.accessor(attrs["JOINTS_0"]).astype(np.int64)
                weights = self.accessor(attrs["WEIGHTS_0"]).astype(np.float64)
                mats = np.einsum("nk,nkij->nij", weights, joint_mats[joints])
                world = np.einsum("nij,nj->ni", mats, hom)[:, :3]
            else:
                world = (hom @ worlds[node_index].T)[:, :3]
            out.append((world, uv))
        return out


def _local(node) -> np.ndarray:
    if "matrix" in node:
        return np.array(node["matrix"], np.float64).reshape(4, 4).T
    t = np.eye(4)
    t[:3, 3] = node.get("translation", [0, 0, 0])
    x, y, z, w = node.get("rotation", [0, 0, 0, 1])
    r = np.eye(4)
    r[:3, :3] = [[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                 [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                 [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]]
    s = np.diag(list(node.get("scale", [1, 1, 1])) + [1])
    return t @ r @ s


def project_through_camera(glb: Glb, camera_node: int, world: np.ndarray, width: int, height: int):
    """Pixels (u, v) of world points through a glTF perspective camera (plus the principal point
    stored in the camera's extras, which glTF itself cannot express)."""
    node = glb.json["nodes"][camera_node]
    cam = glb.json["cameras"][node["camera"]]
    persp = cam["perspective"]
    ty = np.tan(persp["yfov"] / 2)
    tx = ty * persp["aspectRatio"]
    fx, fy = width / (2 * tx), height / (2 * ty)
    cx, cy = width / 2, height / 2
    extras = cam.get("extras", {})
    if "sapiens_intrinsics" in extras:
        cx, cy = extras["sapiens_intrinsics"][2:4]
    inv = np.linalg.inv(glb.world_matrices()[camera_node])
    pc = (np.c_[world, np.ones(len(world))] @ inv.T)[:, :3]
    depth = -pc[:, 2]  # glTF cameras look down -Z
    return np.stack([fx * pc[:, 0] / depth + cx, -fy * pc[:, 1] / depth + cy], 1), (fx, fy)


VALIDATOR = REPO / ".cache" / "node" / "node_modules" / "gltf-validator"


def validate_gltf(path: Path) -> dict:
    """The Khronos glTF-Validator's report (installed by `scripts/install.sh test`). Skips on a
    developer machine without it; fails under CI, where a missing validator is a broken install."""
    import pytest

    node = shutil.which("node")
    if node is None or not VALIDATOR.is_dir():
        message = "glTF-Validator not installed (bash scripts/install.sh test)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    env = dict(os.environ, NODE_PATH=str(VALIDATOR.parent))
    out = subprocess.run([node, str(SUPPORT / "gltf_validate.js"), str(path)], env=env,
                         capture_output=True, text=True, timeout=120, check=True)
    return json.loads(out.stdout)

