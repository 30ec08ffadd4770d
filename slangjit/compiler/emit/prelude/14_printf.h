// slangjit C++ prelude, part of prelude.h (pasted in order; not a standalone header).
// ============================================================================ printf
// Slang's printf (check/printf.py rewrites the format for the argument types it passes: long long,
// unsigned long long, double, int, const char*).  CUDA: the device printf (its output reaches the
// host's stdout when the stream next synchronizes).  CPU: one call's text is formatted first and
// written with one fwrite (stdio locks the stream for the call), then flushed, so the lines of
// many threads never interleave mid-line and the text is on stdout when the dispatch returns.
// @section printf
namespace sj {
#if SJ_CUDA
template <typename... A>
SJ_FN void printf(const char* fmt, A... a) { ::printf(fmt, a...); }
#else
template <typename... A>
inline void printf(const char* fmt, A... a) {
    char buf[256];
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-security"
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
#endif
    int n = std::snprintf(buf, sizeof buf, fmt, a...);
    if (n < 0) return;
    if ((size_t)n < sizeof buf) {
        std::fwrite(buf, 1, (size_t)n, stdout);
    } else {
        char* big = (char*)std::malloc((size_t)n + 1);
        if (big == nullptr) return;
        std::snprintf(big, (size_t)n + 1, fmt, a...);
        std::fwrite(big, 1, (size_t)n, stdout);
        std::free(big);
    }
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic pop
#endif
    std::fflush(stdout);
}
#endif
// A printf that a nested backward derivative replays (ir/quiet.py): it printed in the forward sweep.
template <typename... A>
SJ_FN void printf_quiet(const char*, A...) {}
}  // namespace sj
