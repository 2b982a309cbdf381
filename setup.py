"""Build step of `pip install`: the compiled copies of the compiler's hot modules.

Everything else about the package is in pyproject.toml. The modules listed in
compiler/accelerate.py are compiled with Cython from their own Python sources into extension
modules beside them, each with the SHA-256 of the source it was built from (the import finder
uses a copy only while its source is unchanged). Best effort: without Cython or a C compiler, or
with ``TLX_PURE_PYTHON=1`` set, the install goes on and the package runs from source. A copy
already built from the current source is not rebuilt.
"""

import importlib.util
import os
import shutil
import threading

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("_tlx_accelerate", os.path.join(HERE, "compiler", "accelerate.py"))
accelerate = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(accelerate)
_CYTHON = threading.Lock()


class BuildCompiledCopies(build_ext):
    """build_ext that Cythonizes each module on demand, skips one whose copy is current, builds
    in parallel, and never fails the install."""

    def finalize_options(self):
        super().finalize_options()
        if self.parallel is None:
            self.parallel = os.cpu_count() or 1

    def run(self):
        if accelerate.pure_python_requested():
            self.warn(f"{accelerate.PURE_ENV} is set: not compiling the hot modules")
            return
        super().run()

    def build_extension(self, ext):
        source = ext.sources[0]
        digest = accelerate.source_hash(source)
        target = self.get_ext_fullpath(ext.name)
        for have in (target, self._inplace_path(ext)):
            if accelerate.built_from(have, digest):  # (an editable install's copy beside the source)
                if have != target:
                    os.makedirs(os.path.dirname(target), exist_ok=True)
                    shutil.copy2(have, target)
                    shutil.copy2(have + accelerate.HASH_SUFFIX, target + accelerate.HASH_SUFFIX)
                return
        try:
            from Cython.Build import cythonize

            with _CYTHON:  # (the C compilations run in parallel; Cython itself is not thread-safe)
                (c_ext,) = cythonize([Extension(ext.name, [source])], build_dir=os.path.join(self.build_temp, "cython"),
                                     compiler_directives={"language_level": 3}, quiet=True)
            ext.sources = c_ext.sources  # the generated C file, for setuptools' own Extension
            super().build_extension(ext)
        except Exception as exc:  # best effort: the package runs from source without it
            self.warn(f"not compiling {ext.name} ({type(exc).__name__}: {exc}); it runs from source")
            return
        with open(target + accelerate.HASH_SUFFIX, "w") as f:
            f.write(digest + "\n")

    def _inplace_path(self, ext) -> str:
        """Where an in-place (editable) build puts `ext`: beside its source."""
        package = ext.name.rpartition(".")[0]
        folder = self.get_finalized_command("build_py").get_package_dir(package)
        return os.path.join(folder, os.path.basename(self.get_ext_filename(ext.name)))

    def copy_extensions_to_source(self):
        super().copy_extensions_to_source()
        for ext in self.extensions:  # each copy's source hash goes with it
            built = os.path.join(self.build_lib, self.get_ext_filename(ext.name)) + accelerate.HASH_SUFFIX
            if os.path.exists(built):
                shutil.copy2(built, self._inplace_path(ext) + accelerate.HASH_SUFFIX)

    def get_outputs(self):
        outs = super().get_outputs()
        return outs + [o + accelerate.HASH_SUFFIX for o in outs if os.path.exists(o + accelerate.HASH_SUFFIX)]


extensions = [Extension(name, [os.path.join("compiler", rel)], optional=True)
              for name, rel in accelerate.ACCELERATED.items()]

setup(ext_modules=extensions, cmdclass={"build_ext": BuildCompiledCopies})
