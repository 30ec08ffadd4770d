// slangjit C++ prelude, part of prelude.h (pasted in order; not a standalone header).
// ============================================================================ arrays
// @section arrays
// Value-semantics fixed array (C arrays cannot be returned or assigned).
template <class T, int N>
struct array {
    T data[N];
    template <class I> SJ_FN T& operator[](I i) { return data[i]; }
    template <class I> SJ_FN const T& operator[](I i) const { return data[i]; }
    SJ_FN uint32_t getCount() const { return uint32_t(N); }
};
