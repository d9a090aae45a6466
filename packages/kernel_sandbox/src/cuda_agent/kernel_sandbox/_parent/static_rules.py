"""The tables the static checks use: what PyTorch a candidate may call, and what marks a hack.

Kept apart from ``static_checks.py`` (the analysis) so that each can be read whole.
"""

from __future__ import annotations


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# PyTorch functions (torch.X and tensor methods) that allocate, view, reshape, cast, copy or
# describe tensors: allowed anywhere.
ALLOWED_TORCH = _words(
    """
    Size arange as_strided as_tensor bfloat16 bool byte char chunk clone contiguous copy_ cpu
    cuda data_ptr detach device dim double dtype element_size empty empty_like empty_strided
    enable_grad expand expand_as fill_ finfo flatten float from_numpy full full_like
    get_default_dtype get_device half iinfo inference_mode int is_complex is_contiguous is_cuda
    is_floating_point is_grad_enabled is_tensor item long movedim narrow ndimension nelement
    new_empty new_full new_ones new_tensor new_zeros no_grad numel numpy ones ones_like permute
    requires_grad_ reshape reshape_as select shape short size split squeeze storage_offset
    stride t tensor to tolist transpose type type_as unbind unflatten unsqueeze untyped_storage
    view view_as zero_ zeros zeros_like
    """
)
# torch sub-namespaces whose functions are infrastructure, not compute.
ALLOWED_NAMESPACES = (
    "torch.utils.cpp_extension",
    "torch.cuda.current_stream",
    "torch.cuda.current_device",
    "torch.cuda.get_device_properties",
    "torch.cuda.get_device_capability",
    "torch.cuda.is_available",
    "torch.cuda.device_count",
    "torch.cuda.synchronize",
    "torch.nn.Parameter",
    "torch.nn.Module",
    "torch.nn.ParameterList",
    "torch.nn.ParameterDict",
    "torch.nn.init",
    "torch.library",
    "torch.Tensor",
    "torch.float",
    "torch.is_",
    "torch.get_",
    "torch.Generator",
    "torch.manual_seed",
)
# Tensor methods that compute (flagged when called on anything in the forward path).
COMPUTE_METHODS = _words(
    """
    abs absolute acos add add_ addbmm addmm addmv all amax amin any argmax argmin argsort asin
    atan atan2 baddbmm bmm ceil clamp clamp_ clip cos cosh cumprod cumsum div div_ divide dot
    einsum eq erf exp exp_ expm1 floor fmod ge gelu gt hardswish hardtanh le leaky_relu lerp
    log log1p log2 log_softmax logsumexp lt masked_fill matmul max maximum mean median min
    minimum mm mul mul_ multiply mv nan_to_num ne neg norm pow prod reciprocal relu relu_
    remainder round rsqrt sigmoid sigmoid_ sign silu sin sinh softmax softplus sort sqrt square
    std sub sub_ subtract sum tanh tanh_ topk tril triu true_divide var where
    """
)
# Modules whose import alone means a forbidden capability, and the flag it raises.
FORBIDDEN_IMPORTS = {
    "threading": "concurrency",
    "_thread": "concurrency",
    "multiprocessing": "concurrency",
    "concurrent": "concurrency",
    "asyncio": "concurrency",
    "subprocess": "file_access",
    "socket": "file_access",
    "signal": "file_access",
    "shutil": "file_access",
    "pickle": "file_access",
    "gc": "introspection",
    "inspect": "introspection",
    "ctypes": "introspection",
    "cffi": "introspection",
    "importlib": "introspection",
    "builtins": "introspection",
    "traceback": "introspection",
    "weakref": "introspection",
    # Compute libraries: a kernel launched for show while one of these computes the answer
    # passes the launch counter. The documented formats need none of them.
    "numpy": "library_compute",
    "cupy": "library_compute",
    "cupyx": "library_compute",
    "scipy": "library_compute",
    "numba": "library_compute",
    "jax": "library_compute",
    "jaxlib": "library_compute",
    "tensorflow": "library_compute",
    "sklearn": "library_compute",
    "numexpr": "library_compute",
    "tvm": "library_compute",
}
FORBIDDEN_CALLS = {
    "open": "file_access",
    "exec": "introspection",
    "eval": "introspection",
    "compile": "introspection",
    "__import__": "introspection",
    "globals": "introspection",
    "locals": "introspection",
    "vars": "introspection",
    "setattr": "patching",
    "delattr": "patching",
    "exit": "file_access",
    "quit": "file_access",
    "breakpoint": "introspection",
}
# Attributes (of any object) whose use marks introspection, file or process access, or streams.
FORBIDDEN_ATTRIBUTES = {
    "__globals__": "introspection",
    "__code__": "introspection",
    "__closure__": "introspection",
    "__builtins__": "introspection",
    "__subclasses__": "introspection",
    "__dict__": "introspection",
    "f_back": "introspection",
    "f_locals": "introspection",
    "f_globals": "introspection",
    "gi_frame": "introspection",
    "_getframe": "introspection",
    "modules": "introspection",
    "settrace": "introspection",
    "setprofile": "introspection",
    "environ": "file_access",
    "getenv": "file_access",
    "system": "file_access",
    "popen": "file_access",
    "fork": "concurrency",
    "kill": "file_access",
    "killpg": "file_access",
    "_exit": "file_access",
    "exit": "file_access",
    "abort": "file_access",
    "remove": "file_access",
    "unlink": "file_access",
    "listdir": "file_access",
    "scandir": "file_access",
    "read_text": "file_access",
    "read_bytes": "file_access",
    "write_text": "file_access",
    "write_bytes": "file_access",
    "Stream": "side_stream",
    "ExternalStream": "side_stream",
    "set_stream": "side_stream",
    "stream": "side_stream",
    "getStreamFromPool": "side_stream",
}
# Strings in kernel sources that create or pick a stream other than the current one.
STREAM_SOURCE_MARKERS = ("cudaStreamCreate", "getStreamFromPool", "cudaStreamBeginCapture")
MEMO_DECORATORS = frozenset(["cache", "cached_property", "lru_cache", "memoize"])
FALLBACK_HINT = "handle errors by fixing the kernel; no fallback paths"
