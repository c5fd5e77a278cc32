// One object of type T per thread, kept on the heap behind a trivially destructible thread-local
// pointer. libterra's TLS block must stay small: the Python module dlopens libterra, and glibc
// places a dlopen'ed library's TLS in static TLS only when it fits the surplus (a few hundred
// bytes); otherwise every thread-local access of every op goes through _dl_tlsdesc_dynamic (~500
// instructions a Python op call when the allocator's 3 KB of caches sat inline).
// At thread exit the thread's object is deleted and its pointer moves to one shared object in the
// state T's destructor leaves (`alive == false`, nothing cached), which is only read from then on:
// thread-locals destroyed later may still free memory through it.
#pragma once

namespace terra {

template <class T>  // T: default-constructible, with a `bool alive` its users check
class ThreadHeap {
 public:
  static T& get() {
    T* p = t_ptr;
    return __builtin_expect(p != nullptr, 1) ? *p : make();
  }

 private:
  struct Owner {
    ~Owner() {
      T* p = t_ptr;
      t_ptr = &dead();
      delete p;
    }
  };
  static T& dead() {
    static T* d = [] {
      T* x = new T;  // leaked: threads may free memory through it during static destruction
      x->alive = false;
      return x;
    }();
    return *d;
  }
  __attribute__((noinline)) static T& make() {
    thread_local Owner owner;  // registered on first use; its destructor runs at thread exit
    (void)&owner;
    t_ptr = new T;
    return *t_ptr;
  }
  static inline thread_local T* t_ptr = nullptr;
};

}  // namespace terra
