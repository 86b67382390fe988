// post_tonemap.glsl: HDR -> display. Operators take linear HDR (>= 0, exposure applied) to
// display light in 0..1 (AgX's: its display value ^ 2.2), then the sRGB encoding
// (tonemap_encoded); all are monotonic and map 0 to exactly 0. visual/post/tonemap.py has them
// in numpy.
#define TONEMAP_ACES 0
#define TONEMAP_AGX 1
#define TONEMAP_LINEAR 2

// Narkowicz 2015, "ACES Filmic Tone Mapping Curve" (fitted, no 0.6 pre-scale): reaches 1 at
// x ~ 7.24 and is clamped there.
vec3 tonemap_aces(vec3 x) {
    return clamp((x * (2.51 * x + 0.03)) / (x * (2.43 * x + 0.59) + 0.14), 0.0, 1.0);
}

// AgX, the analytic approximation of Wrensch 2023 ("Minimal AgX implementation", the 6th order
// fit of Troy Sobotka's default contrast), its black point moved to exactly 0 (the fit gives
// -0.00232) and its output (display-encoded, for a 2.2 display) taken back to linear.
vec3 agx_contrast(vec3 x) {
    vec3 x2 = x * x;
    vec3 x4 = x2 * x2;
    vec3 curve = 15.5 * x4 * x2 - 40.14 * x4 * x + 31.96 * x4 - 6.868 * x2 * x + 0.4298 * x2
               + 0.1191 * x - 0.00232;
    return (curve + 0.00232) * (1.0 / (0.99858 + 0.00232));
}

// AgX's display value, for a 2.2 display: its linear light is the value ^ 2.2.
vec3 agx_display(vec3 color) {
    const mat3 inset = mat3(
        0.842479062253094, 0.0423282422610123, 0.0423756549057051,
        0.0784335999999992, 0.878468636469772, 0.0784336,
        0.0792237451477643, 0.0791661274605434, 0.879142973793104);
    const mat3 outset = mat3(
        1.19687900512017, -0.0528968517574562, -0.0529716355144438,
        -0.0980208811401368, 1.15190312990417, -0.0980434501171241,
        -0.0990297440797205, -0.0989611768448433, 1.15107367264116);
    const float min_ev = -12.47393;
    const float max_ev = 4.026069;
    vec3 value = clamp(log2(max(inset * color, vec3(1e-10))), min_ev, max_ev);
    value = agx_contrast((value - min_ev) / (max_ev - min_ev));
    return clamp(outset * value, 0.0, 1.0);
}

// The sRGB transfer function (IEC 61966-2-1): linear 0..1 -> encoded 0..1, 0 -> 0 exactly.
// Its curve, 1.055 x^(1/2.4) - 0.055, as a polynomial in q = x^(1/4) (two square roots; fitted
// over the curve's part, 0.0031308..1, through its ends, monotonic): within 8.4e-6 of the curve
// (a 470th of an 8-bit step), half the cost of pow on software GL (1.8 ms a 1280x720 frame).
vec3 srgb_encode(vec3 linear) {
    linear = clamp(linear, 0.0, 1.0);
    vec3 q = sqrt(sqrt(linear));
    vec3 curve = -0.06118883 + q * (0.16074161 + q * (1.25939322 + q * (-0.58313951
                 + q * (0.29317077 + q * -0.06897726))));
    return mix(12.92 * linear, curve, step(vec3(0.0031308), linear));
}

// Triangular noise in (-1, 1) from interleaved gradient noise (Jimenez 2014), fixed per pixel.
float dither_noise(vec2 pixel) {
    float first = fract(52.9829189 * fract(dot(pixel, vec2(0.06711056, 0.00583715))));
    float second = fract(52.9829189 * fract(dot(pixel + vec2(17.0, 59.0),
                                                 vec2(0.06711056, 0.00583715))));
    return first + second - 1.0;
}

// The sRGB encoding of AgX's linear light, v ^ 2.2, without the power: polynomials in s =
// sqrt(v), below the sRGB curve's knee (v ^ 2.2 = 0.0031308: s = 0.26966883) s^4 times a cubic
// for 12.92 v^2.2, above it a quintic for 1.055 v^(2.2 / 2.4) - 0.055; each fitted through its
// ends, monotonic, within 2.6e-6. On software GL the pow and the transfer's roots cost 2 ms a
// 1280x720 frame.
vec3 agx_srgb(vec3 v) {
    vec3 s = sqrt(v);
    vec3 s4 = (s * s) * (s * s);
    vec3 low = s4 * (2.73368207 + s * (29.25904929 + s * (-56.53050447 + s * 57.92060680)));
    vec3 high = -0.05800019 + s * (0.06413450 + s * (1.18749931 + s * (-0.29988522
                + s * (0.13670801 + s * -0.03045641))));
    return mix(low, high, step(vec3(0.26966883), s));
}

// What the display pass writes for linear HDR `color` (>= 0, exposure applied): tone mapped
// and sRGB encoded, 0 -> 0 exactly.
vec3 tonemap_encoded(vec3 color, int operator_index) {
    color = max(color, vec3(0.0));
    if (operator_index == TONEMAP_AGX) {
        return agx_srgb(agx_display(color));
    }
    if (operator_index == TONEMAP_LINEAR) {
        return srgb_encode(clamp(color, 0.0, 1.0));
    }
    return srgb_encode(tonemap_aces(color));
}
