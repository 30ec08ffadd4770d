// ------------------------------------------------------------------------------ dynamic objects
// An interface-typed value whose concrete type is chosen at run time (createDynamicObject, see
// compiler/check/dynamic.py): the type's conformance id and the concrete value's bytes.  The
// checker sizes N (32-bit words) for the largest conforming type.  Bytes are copied, not
// converted, because Slang reinterprets the data of createDynamicObject the same way.
// @section dynamic
namespace sj {

// Slang's layout of an existential in memory: RTTI handle (8 bytes; zero here, ignored when read),
// witness-table id (8 bytes: the conformance id, then 0), the any-value payload (N words).
template <int N>
struct dyn {
    uint32_t rtti[2];
    uint32_t tag;
    uint32_t tag_hi;
    uint32_t data[N];
};

template <class D, class T>
SJ_FN D dyn_make(uint32_t tag, const T& x) {
    D v{};
    v.tag = tag;
    memcpy(v.data, &x, sizeof(T) < sizeof(v.data) ? sizeof(T) : sizeof(v.data));
    return v;
}

template <class T, int N>
SJ_FN T dyn_get(const dyn<N>& v) {
    static_assert(sizeof(T) <= sizeof(v.data), "a conforming type is larger than its dynamic object");
    T x;
    memcpy(&x, v.data, sizeof(T));
    return x;
}

}  // namespace sj
