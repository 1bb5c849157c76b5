"""Check an .npy array's header against the bytes that hold it, before numpy allocates it.

    >>> check_npy(open("x.npy", "rb"), os.path.getsize("x.npy"), "--feed x")
    TfgInputError: --feed x: the .npy header declares shape (1099511627776, 1048576) of
    float32 (4.00 EiB), but the file holds 64 bytes

numpy allocates what an .npy header declares before it reads the data: a 130-byte file that
declared [2**40, 2**20] float32, or an .npz member that declared 8 GiB over 64 MiB of zeros
(a few MB of deflate), ran `tfg run` out of memory. The declared size must equal what the
file (or the zip member, by the zip's directory) holds, and fit the memory limit.
"""
import zipfile

from numpy.lib import format as npy_format

from tfg.errors import TfgInputError
from tfg.executor.limits import human, resolve_limit

MAX_HEADER = 10000  # numpy's own default bound on a header's size


def check_npy(f, size, where):
    """Read the header of the .npy in file object `f` holding `size` bytes in all; raise an
    input error naming `where` unless its data is exactly the rest of the file, plain (no
    objects) and within the memory limit."""
    try:
        version = npy_format.read_magic(f)
        read = (npy_format.read_array_header_1_0 if version == (1, 0)
                else npy_format.read_array_header_2_0)
        shape, _, dtype = read(f, max_header_size=MAX_HEADER)
    except (ValueError, EOFError, OSError, TypeError) as e:
        raise TfgInputError(f"{where}: not a readable .npy array ({' '.join(str(e).split())})"
                            ) from None
    if dtype.hasobject:
        raise TfgInputError(f"{where}: holds Python objects (pickled); tfg reads only plain "
                            "arrays")
    count = 1
    for d in shape:
        count *= int(d)
    nbytes = count * dtype.itemsize
    stored = size - f.tell()
    if nbytes != stored:
        raise TfgInputError(
            f"{where}: the .npy header declares shape {tuple(shape)} of {dtype} "
            f"({human(nbytes)}), but the file holds {human(max(stored, 0))} of data")
    limit = resolve_limit(None)
    if limit is not None and nbytes > limit:
        raise TfgInputError(f"{where}: an array of {human(nbytes)} is over the memory limit "
                            f"of {human(limit)}")


def check_npy_file(path, where):
    with open(path, "rb") as f:
        f.seek(0, 2)
        size = f.tell()
        f.seek(0)
        check_npy(f, size, where)


def check_npz(path, where):
    """check_npy for every member of the .npz at `path` (sizes from the zip's directory). A
    member that is not an .npy array is refused too: numpy's loader would read it whole into
    memory as bytes (a member without the .npy suffix that deflates to gigabytes)."""
    try:
        with zipfile.ZipFile(path) as z:
            for info in z.infolist():
                if info.is_dir():
                    continue
                name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
                if info.flag_bits & 0x1:  # (zipfile would raise RuntimeError on reading it)
                    raise TfgInputError(f"{where}: member {info.filename!r} is encrypted")
                with z.open(info) as f:
                    check_npy(f, info.file_size, f"{where} (array {name!r})")
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, EOFError,
            RuntimeError) as e:
        raise TfgInputError(f"{where}: not a readable .npz file ({' '.join(str(e).split())})"
                            ) from None



