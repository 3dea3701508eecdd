"""A compiled C graph saved to a directory, and loaded back without the compiler.

An artifact is a directory of four files:

* ``model.so``       the shared library the C runtime built (kernels and the driver)
* ``constants.npz``  the arrays its slots point at, each as raw bytes (``c0``, ``c1``...;
                     dtype and shape in the manifest), uncompressed, each member 64-byte
                     aligned; loading parses the .npy headers itself and uses the bytes
                     where they lie (never unpickles; ``np.load(allow_pickle=False)``
                     reads the file too)
* ``manifest.json``  format and fusionlang version, target, compiler flags, the machine
                     and CPU features the library was built for, the SHA-256 of the
                     library and of the constants, inputs and outputs (dtypes, shapes), and
                     the run layout (:class:`.c_program.Layout`: slot table, arena size and
                     alignment, where outputs are read, the error record's calls), and
                     the notes the saver added (the CLI: seeded ranges of integer inputs)
* ``plan.json``      the fusion plan it was compiled from (for people and tools; loading
                     does not read it)

:func:`load` imports NumPy, ctypes and the light modules of this package only (no islpy,
sympy, lark, networkx or onnx), and refuses with an :class:`ArtifactError` (the CLI's
exit 2) a directory that is no artifact, a missing or corrupt file, another format
version or another fusionlang major.minor, a machine lacking a CPU feature the library was
built for, a library or constants whose bytes are not the ones saved, and a run layout
that would reach outside the memory it names. The library is loaded from a private copy of
the bytes that were checked, so a file swapped after the check is never what runs; the
constants are mapped from their file (see :func:`_mapped`). The
hashes find changed files, not a manifest forged together with them: an artifact is code.
"""

from __future__ import annotations

import ctypes
import io
import json
import mmap
import os
import platform
import re
import shutil
import struct
import tempfile
import zipfile
from pathlib import Path
from typing import Mapping

import numpy as np

from fusionlang.backend.c_program import ARENA, CONST, FEED, CProgram, Layout, OutputSource
from fusionlang.backend.ccompile import compiler, flags, native_features
from fusionlang.backend.kernel_cache import sha256_hex
from fusionlang.backend.machine import cpu_features
from fusionlang.backend import thread_pool
from fusionlang.backend.omp_wait import passive_wait_while_loading
from fusionlang.errors import ArtifactError
from fusionlang.feeds import check_inputs
from fusionlang.version import VERSION

#: the artifact format this fusionlang writes and reads; bump it when a file changes meaning
FORMAT = 1
MANIFEST, LIBRARY, CONSTANTS, PLAN = "manifest.json", "model.so", "constants.npz", "plan.json"
#: where constants.npz puts each member's bytes, and how loading reads the files: NumPy's
#: own alignment of array data inside an .npy (a cache line, the widest vector load)
ALIGN = 64
#: bytes of a zip local file header before its name; of an extra field's header; the
#: (unregistered) extra field id of the padding that aligns a member
_LOCAL_HEADER, _EXTRA_HEADER, _PADDING_ID = 30, 4, 0x6C66
#: features a refusal names (a machine may lack dozens)
_FEATURES_SHOWN = 6


# ----- saving ---------------------------------------------------------------------------
def save_artifact(compiled, path: str | os.PathLike, notes: dict | None = None) -> Path:
    """Write ``compiled`` (a C :class:`.runtime.CompiledGraph`) as an artifact directory
    at ``path`` (created; an earlier artifact there is replaced), with ``notes`` (JSON
    data) kept in its manifest. Returns the path."""
    if compiled.target != "c":
        raise ArtifactError(f"save: only C artifacts are supported (this graph was compiled for target "
                            f"{compiled.target!r}); compile with target='c'")
    if compiled.sanitize:
        raise ArtifactError("save: a sanitize=True build needs AddressSanitizer loaded before it; save a build "
                            "compiled without sanitize")
    where = _artifact_directory(Path(path))
    runtime = compiled._runtime
    library = Path(runtime.library_path).read_bytes()
    constants = _constants_bytes(runtime.program.constants)
    manifest = _manifest(compiled, runtime.layout, sha256_hex(library), sha256_hex(constants))
    manifest["notes"] = notes or {}
    _write(where / LIBRARY, library)
    _write(where / CONSTANTS, constants)
    _write(where / PLAN, compiled.plan.to_json(indent=1).encode())
    _write(where / MANIFEST, json.dumps(manifest, indent=1).encode())  # last: a half-written artifact has none
    return where


def _artifact_directory(path: Path) -> Path:
    """``path`` ready to write into: a new directory, or one holding an earlier artifact."""
    if path.exists() and not path.is_dir():
        raise ArtifactError(f"save: {path} exists and is not a directory")
    if path.is_dir() and any(path.iterdir()) and not (path / MANIFEST).is_file():
        raise ArtifactError(f"save: {path} is a non-empty directory that holds no artifact; choose a new path")
    try:
        path.mkdir(parents=True, exist_ok=True)
        (path / MANIFEST).unlink(missing_ok=True)  # first: until the new one is written, no artifact is here
    except OSError as exc:
        raise ArtifactError(f"save: cannot create {path}: {exc.strerror or exc}") from None
    return path


def _write(path: Path, data: bytes) -> None:
    """``data`` as ``path``, by a rename: a process that loaded an earlier artifact there
    keeps the constants it mapped (rewritten in place, they would change under it)."""
    scratch = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        scratch.write_bytes(data)
        os.replace(scratch, path)
    except OSError as exc:
        scratch.unlink(missing_ok=True)
        raise ArtifactError(f"save: cannot write {path}: {exc.strerror or exc}") from None


def _constants_bytes(constants: list[np.ndarray]) -> bytes:
    """The constants as an uncompressed .npz of raw bytes (NumPy saves bfloat16 and float8
    as records that load back as void, so the dtype travels in the manifest instead), each
    member's bytes starting at a multiple of :data:`ALIGN` (padding in its local header's
    extra field), so loading can use them where they lie (:func:`_read_constants`)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as archive:
        for k, array in enumerate(constants):
            member = io.BytesIO()
            np.lib.format.write_array(member, np.ascontiguousarray(array).reshape(-1).view(np.uint8),
                                      allow_pickle=False)
            info = zipfile.ZipInfo(f"c{k}.npy")
            starts = out.tell() + _LOCAL_HEADER + len(info.filename) + _EXTRA_HEADER
            info.extra = struct.pack("<HH", _PADDING_ID, -starts % ALIGN) + bytes(-starts % ALIGN)
            archive.writestr(info, member.getvalue())
    return out.getvalue()


def _built_for() -> frozenset[str]:
    """The CPU features the library may use: those of this processor that the compiler's
    ``-march=native`` enables (all of this processor's where the compiler cannot list
    them), so loading on another machine asks for the instruction sets that matter, not
    for a virtual machine's incidental flags (``hypervisor``, ``tsc_known_freq``)."""
    native = native_features()
    if native is None:
        return cpu_features()
    wanted = {_squeezed(name) for name in native}
    return frozenset(flag for flag in cpu_features() if _squeezed(flag) in wanted)


def _squeezed(feature: str) -> str:
    """A feature's name as GCC and the kernel both spell it: avx512_vnni (the kernel) is
    avx512vnni (GCC), sse4_2 is sse4.2. A few are named apart (pclmulqdq and pclmul) and
    are not recorded."""
    return feature.replace("_", "").replace(".", "")


def _manifest(compiled, layout: Layout, library_sha: str, constants_sha: str) -> dict:
    graph = compiled.graph
    return {
        "format": FORMAT,
        "fusionlang": VERSION,
        "target": "c",
        "graph": graph.name,
        "machine": platform.machine(),
        "cpu_features": sorted(_built_for()),
        "compiler": {"command": compiler(), "flags": flags(openmp=compiled.openmp)},
        "options": {"openmp": compiled.openmp, "threads": compiled.threads, "check_indices": compiled.check_indices},
        "sha256": {LIBRARY: library_sha, CONSTANTS: constants_sha},
        "inputs": [{"name": n, "shape": list(graph.types[n].shape), "dtype": graph.types[n].dtype}
                   for n in graph.inputs],
        "outputs": [{"name": o.name, "shape": list(o.shape), "dtype": o.dtype} for o in layout.outputs],
        "constants": [{"shape": list(a.shape), "dtype": a.dtype.name} for a in compiled._runtime.program.constants],
        "layout": layout.to_dict(),
    }


# ----- loading ----------------------------------------------------------------------------
class LoadedGraph:
    """A saved compiled graph, loaded: ``run(feeds)`` checks feeds and returns outputs as
    :meth:`.runtime.CompiledGraph.run` does, with the same errors."""

    def __init__(self, path: Path, manifest: dict, inputs: dict[str, tuple[tuple[int, ...], np.dtype]],
                 program: CProgram):
        self.path, self.manifest, self._program = path, manifest, program
        #: input name -> (shape, dtype), in the graph's order
        self.inputs = inputs
        self.outputs = [source.name for source in program.layout.outputs]

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return self._program.run(self._checked_feeds(feeds))

    def execute(self, feeds: Mapping[str, np.ndarray]) -> None:
        """Run on already checked, contiguous feeds without collecting the outputs."""
        self._program.execute(feeds)

    def _checked_feeds(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {k: np.ascontiguousarray(v) for k, v in check_inputs(self.inputs, feeds).items()}

    def __repr__(self) -> str:
        return f"<LoadedGraph {self.manifest['graph']!r} from {self.path}: {len(self.manifest['layout']['calls'])} calls>"


def load(path: str | os.PathLike) -> LoadedGraph:
    """The artifact directory ``path`` (written by :meth:`.runtime.CompiledGraph.save`),
    checked and ready to run; ArtifactError saying why it is refused otherwise."""
    where = Path(path)
    if not where.is_dir():
        raise ArtifactError(f"{where}: not an artifact directory ({'not a directory' if where.exists() else 'no such path'})")
    manifest = _read_manifest(where)
    _check_compatible(where, manifest)
    library = _verified_bytes(where, LIBRARY, manifest)
    constants = _read_constants(where, manifest)
    try:
        layout = Layout.from_dict(manifest["layout"])
        inputs = {i["name"]: (tuple(i["shape"]), _dtype(i["dtype"])) for i in manifest["inputs"]}
        _check_layout(layout, inputs, constants)
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise ArtifactError(f"{where / MANIFEST}: corrupt run layout ({type(exc).__name__}: {exc})") from None
    return LoadedGraph(where, manifest, inputs, CProgram(_load_library(where, library, manifest), layout, constants))


def _check_layout(layout: Layout, inputs: dict, constants: list[np.ndarray]) -> None:
    """ValueError unless every slot and output names an input, a constant or an arena
    buffer that exists, and every buffer lies inside the arena: a manifest damaged there
    would have the library read or write outside its memory. (A manifest forged together
    with the hashes it records is not detected: load only artifacts you would run.)"""
    if layout.align < 1 or layout.align & (layout.align - 1) or layout.arena_bytes < 0:
        raise ValueError(f"arena of {layout.arena_bytes} bytes aligned to {layout.align}")
    for value, (offset, nbytes) in layout.arena.items():
        if offset < 0 or nbytes < 0 or offset + nbytes > layout.arena_bytes:
            raise ValueError(f"buffer {value!r} at {offset} ({nbytes} bytes) is outside the arena")
    known = {FEED: inputs, CONST: range(len(constants)), ARENA: layout.arena}
    for slot, (role, key) in enumerate(layout.slots):
        if key not in known[role]:
            raise ValueError(f"slot {slot} ({role}) names {key!r}, which the artifact does not hold")
    for output in layout.outputs:
        size = int(np.prod(output.shape, dtype=np.int64)) * _dtype(output.dtype).itemsize
        if size > _bytes_of(output, inputs, constants, layout):
            raise ValueError(f"output {output.name!r} does not fit where it is read")


def _bytes_of(source: OutputSource, inputs: dict, constants: list[np.ndarray], layout: Layout) -> int:
    """Bytes of the storage an output is read from."""
    if source.kind == "input":
        shape, dtype = inputs[source.root]
        return int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if source.kind == "const":
        return constants[source.constant].nbytes
    return layout.arena[source.root][1]


def _read_manifest(where: Path) -> dict:
    file = where / MANIFEST
    try:
        manifest = json.loads(file.read_text())
    except FileNotFoundError:
        raise ArtifactError(f"{where}: not an artifact (no {MANIFEST})") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ArtifactError(f"{file}: corrupt manifest ({exc})") from None
    required = ("format", "fusionlang", "target", "machine", "cpu_features", "sha256", "inputs", "outputs",
                "constants", "layout")
    missing = [key for key in required if not isinstance(manifest, dict) or key not in manifest]
    if missing:
        raise ArtifactError(f"{file}: corrupt manifest (no {missing[0]!r})")
    return manifest


def _minor_version(version: str) -> str:
    """major.minor of a version (the whole string where it has none: a bare checkout's)."""
    found = re.match(r"\d+\.\d+", version)
    return found.group(0) if found else version


def _check_compatible(where: Path, manifest: dict) -> None:
    """Same format, fusionlang of the same major.minor (the run layout and the driver's
    calling convention change only with one), the C target, this machine's kind, and
    every CPU feature the library may use."""
    file = where / MANIFEST
    if manifest["format"] != FORMAT:
        raise ArtifactError(f"{file}: artifact format {manifest['format']!r}, this fusionlang reads format {FORMAT}")
    saved = str(manifest["fusionlang"])
    if _minor_version(saved) != _minor_version(VERSION):
        raise ArtifactError(f"{file}: saved by fusionlang {saved}, which this fusionlang {VERSION} cannot run "
                            f"(the major.minor versions must agree); compile the model again")
    if manifest["target"] != "c":
        raise ArtifactError(f"{file}: target {manifest['target']!r}: only C artifacts can be loaded")
    if manifest["machine"] != platform.machine():
        raise ArtifactError(f"{file}: built for {manifest['machine']} processors, this one is {platform.machine()}")
    lacking = sorted(set(manifest["cpu_features"]) - cpu_features())
    if lacking:
        shown = ", ".join(lacking[:_FEATURES_SHOWN]) + (f" and {len(lacking) - _FEATURES_SHOWN} more"
                                                          if len(lacking) > _FEATURES_SHOWN else "")
        raise ArtifactError(f"{file}: the library was built for CPU features this processor lacks ({shown}); "
                            f"compile the model again on this machine")


def _verified_bytes(where: Path, name: str, manifest: dict, read=Path.read_bytes):
    """``read(file)`` of ``name``, refused unless its SHA-256 is the manifest's."""
    try:
        data = read(where / name)
    except OSError as exc:
        raise ArtifactError(f"{where / name}: cannot read ({exc.strerror or exc})") from None
    want = manifest["sha256"].get(name) if isinstance(manifest["sha256"], dict) else None
    if sha256_hex(data) != want:
        raise ArtifactError(f"{where / name}: its SHA-256 is not the one the manifest records "
                            f"(the file was changed after saving); refusing to load it")
    return data


def _mapped(file: Path) -> np.ndarray:
    """The bytes of ``file`` mapped copy-on-write (page-aligned). Mapped, not read: reading
    resnet50's 99 MB of constants into fresh memory cost 40 to 260 ms of system time on a
    busy machine (the kernel zeroing and compacting pages), mapping its cached pages almost
    none. What the mapping shows is checked once: a rewrite of the file in place under a
    running process is not (save replaces files by renames, never rewrites them)."""
    with open(file, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return np.zeros(0, np.uint8)
        mapping = mmap.mmap(f.fileno(), size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    return np.frombuffer(mapping, np.uint8)


def _read_constants(where: Path, manifest: dict) -> list[np.ndarray]:
    """The constants as views of the checked bytes, where :func:`_constants_bytes` put
    them (nothing is copied: 100 MB of resnet50 weights cost 0.18 s through np.load)."""
    data = _verified_bytes(where, CONSTANTS, manifest, _mapped)
    try:
        with zipfile.ZipFile(_BufferFile(data)) as archive:
            members = {info.filename: info for info in archive.infolist()}
        return [_member(data, members[f"c{k}.npy"]).view(_dtype(c["dtype"])).reshape(c["shape"])
                for k, c in enumerate(manifest["constants"])]
    except (KeyError, TypeError, ValueError, OSError, zipfile.BadZipFile, struct.error) as exc:
        raise ArtifactError(f"{where / CONSTANTS}: corrupt constants ({type(exc).__name__}: {exc})") from None


def _member(data: np.ndarray, info: zipfile.ZipInfo) -> np.ndarray:
    """The raw bytes of one stored member, an .npy of uint8, as a view of ``data``."""
    if info.compress_type != zipfile.ZIP_STORED:
        raise ValueError(f"{info.filename} is compressed")
    name_length, extra_length = struct.unpack("<HH", data[info.header_offset + 26:info.header_offset + 30].tobytes())
    start = info.header_offset + _LOCAL_HEADER + name_length + extra_length
    npy = _BufferFile(data[start:start + info.file_size])
    version = np.lib.format.read_magic(npy)
    shape, fortran, dtype = (np.lib.format.read_array_header_1_0(npy) if version == (1, 0)
                             else np.lib.format.read_array_header_2_0(npy))
    if dtype != np.uint8 or len(shape) != 1 or start + npy.tell() + shape[0] > start + info.file_size:
        raise ValueError(f"{info.filename} is not the raw bytes of a constant")
    member = data[start + npy.tell():start + npy.tell() + shape[0]]
    # written by another zip writer (a zip64 header), the bytes may lie unaligned: copy them
    return member if member.ctypes.data % ALIGN == 0 else _aligned_copy(member)


def _aligned_copy(data: np.ndarray) -> np.ndarray:
    copy = _aligned_empty(data.nbytes)
    copy[:] = data
    return copy


def _aligned_empty(size: int) -> np.ndarray:
    """``size`` bytes starting at a multiple of :data:`ALIGN`."""
    raw = np.empty(size + ALIGN, np.uint8)
    return raw[-raw.ctypes.data % ALIGN:][:size]


class _BufferFile(io.RawIOBase):
    """A read-only file over an array's bytes, without copying them (io.BytesIO copies)."""

    def __init__(self, data: np.ndarray):
        self._view, self._at = memoryview(data.data).cast("B"), 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._at

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._at = max(0, offset + (0, self._at, len(self._view))[whence])
        return self._at

    def readinto(self, buffer) -> int:
        count = max(0, min(len(buffer), len(self._view) - self._at))
        buffer[:count] = self._view[self._at:self._at + count]
        self._at += count
        return count


def _dtype(name: str) -> np.dtype:
    """NumPy's dtype of a fusionlang dtype name; bfloat16, float8 and int4 are
    ml_dtypes' (imported only for a graph that has one)."""
    try:
        return np.dtype(name)
    except TypeError:
        import ml_dtypes  # noqa: F401  (registers its dtypes with NumPy by name)

        return np.dtype(name)


def _load_library(where: Path, library: bytes, manifest: dict) -> ctypes.CDLL:
    """The library from a private copy of the checked bytes (read, not mapped: they are
    code; the copy is removed once loaded: the
    mapping stays), so what runs is what was checked, and a second load of a changed
    artifact in one process is not the first one's (the loader caches by path)."""
    scratch = tempfile.mkdtemp(prefix="fusionlang-artifact-")
    copy = Path(scratch) / LIBRARY
    try:
        copy.write_bytes(library)
        openmp = bool(manifest.get("options", {}).get("openmp"))
        with passive_wait_while_loading(openmp and thread_pool.needs_libgomp(library)):
            return ctypes.CDLL(str(copy))
    except OSError as exc:
        raise ArtifactError(f"{where / LIBRARY}: cannot be loaded ({exc})") from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


__all__ = ["CONSTANTS", "FORMAT", "LIBRARY", "MANIFEST", "PLAN", "LoadedGraph", "load", "save_artifact"]
