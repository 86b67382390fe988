"""OpenGL contexts and the backend they can run: a headless context (EGL on Linux, the
system's own standalone context on macOS and Windows), the context's version, and which
backend (`--gl`) it takes: compute shaders (4.3) or transform feedback (4.1, macOS), chosen by
what the context offers, never by trying a compile. Main thread only.
"""

from __future__ import annotations

import sys

import moderngl

# The simulation and culling backends: "4.3" compute shaders and storage buffers, "4.1"
# transform feedback and float textures (visual/backends.py names their classes).
BACKENDS = ("4.3", "4.1")
GL_CHOICES = ("auto", *BACKENDS)  # --gl
COMPUTE_EXTENSIONS = ("GL_ARB_compute_shader", "GL_ARB_shader_storage_buffer_object",
                      "GL_ARB_shader_image_load_store")


def create_headless_context(minimum: str = "4.3", platform: str = sys.platform
                            ) -> moderngl.Context:
    """A standalone OpenGL context: no display needed. On Linux through EGL (a GPU's driver or
    Mesa's llvmpipe, with no X server); elsewhere through moderngl's default standalone
    backend, since macOS (CGL) and Windows (WGL) have no EGL. `minimum`: the version it must
    have, "4.3" (the compute backend's, the default) or "4.1" (the show's: pick_backend then
    chooses the backend, and says why where --gl asked for one it cannot have). 4.3 is always
    asked for first: NVIDIA's EGL gives exactly the version asked for (a 4.1 context there has
    no compute shaders, and the show then ran the 4.1 backend on an H200), where Mesa gives
    its newest whatever is asked."""
    linux = platform.startswith("linux")
    through = {"backend": "egl"} if linux else {}
    requires = (430,) if minimum == "4.3" else (430, 410)
    for require in requires:
        try:
            return moderngl.create_context(standalone=True, require=require, **through)
        except Exception as exc:  # moderngl raises plain Exceptions for driver problems
            failure = exc
    what = ("install Mesa's EGL (Debian: libegl1 libgl1-mesa-dri) or a GPU driver" if linux
            else "update the GPU driver")
    raise RuntimeError(
        f"could not create a headless OpenGL {minimum} core context"
        f"{' through EGL' if linux else ''} ({failure}): the instrument needs 4.1 at least "
        f"(4.3 for compute shaders); {what}") from failure


_PREPARED: list[tuple[str, moderngl.Context]] = []  # made ahead of need: (minimum, context)


def prepare_headless_context(minimum: str = "4.1") -> None:
    """Make a headless context ahead of need (the supervisor's spare process: on the H200's
    host a context made right after a killed GL process waits 1-1.9 s for its teardown); a
    failure is left for the later attempt to say."""
    try:
        _PREPARED.append((minimum, create_headless_context(minimum)))
    except RuntimeError:
        pass


def prepared_or_new_context(minimum: str = "4.3") -> moderngl.Context:
    """The context prepared ahead of need for `minimum`, else a new one."""
    for index, (prepared_for, ctx) in enumerate(_PREPARED):
        if prepared_for == minimum:
            del _PREPARED[index]
            return ctx
    return create_headless_context(minimum)


def gl_version(ctx: moderngl.Context) -> str:
    """The context's version as "4.1" (what --gl and the HUD name)."""
    code = ctx.version_code
    return f"{code // 100}.{code // 10 % 10}"


def compute_missing(ctx: moderngl.Context) -> str | None:
    """Why this context cannot run the compute backend (None: it can), asked of its version
    and extensions, never by compiling a compute shader: a failed compute compile leaves a GL
    error behind that breaks pyglet's next call. The compute shaders are GLSL 4.30, so the
    context must be 4.3 or later; an older one that offers the extensions still cannot
    compile them (Mesa's 4.1 override keeps GL_ARB_compute_shader)."""
    if ctx.version_code >= 430:
        return None
    have = set(ctx.extensions)
    lacking = [name for name in COMPUTE_EXTENSIONS if name not in have]
    what = f"without {', '.join(lacking)}" if lacking else "GLSL 4.30 not offered"
    return f"OpenGL {gl_version(ctx)} {what}"


def pick_backend(ctx: moderngl.Context, asked: str = "auto") -> tuple[str, str]:
    """(backend, why) for `--gl asked` on this context: "auto" takes 4.3 where compute is
    there and 4.1 otherwise. Asking for 4.3 where it is not raises ValueError with the line to
    say; so does a context below 4.1."""
    if asked not in GL_CHOICES:
        raise ValueError(f"--gl must be one of {', '.join(GL_CHOICES)}, got {asked!r}")
    if ctx.version_code < 410:
        raise ValueError(f"--gl {asked}: this driver gives OpenGL {gl_version(ctx)}; the "
                         "instrument needs 4.1 core at least")
    missing = compute_missing(ctx)
    if asked == "4.3" and missing:
        raise ValueError(f"--gl 4.3: no compute shaders here ({missing}); use --gl 4.1 or "
                         "--gl auto")
    if asked == "4.1":
        return "4.1", "asked (--gl 4.1)"
    if missing:
        return "4.1", f"no compute shaders: {missing}"
    return "4.3", f"compute shaders (OpenGL {gl_version(ctx)})"



def is_software(ctx: moderngl.Context) -> bool:
    """Mesa's llvmpipe / softpipe: compute runs on the CPU and timer queries read ~0 ns."""
    renderer = ctx.info.get("GL_RENDERER", "").lower()
    return "llvmpipe" in renderer or "softpipe" in renderer or "swrast" in renderer

