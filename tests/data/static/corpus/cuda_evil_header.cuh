#pragma once
#include <dlfcn.h>  // expect: cpp-forbidden-include
inline void* grab(const char* lib) { return dlopen(lib, 1); }  // expect: cpp-dynamic-loading
