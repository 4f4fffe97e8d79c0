/* embed.h — a file of the source tree built into the binary by the assembler.
 *
 *   DMT_EMBED(dmt_thing, "server/api/thing.json")   at file scope, then
 *   const char *p = dmt_thing; size_t n = dmt_thing_end - dmt_thing;
 *
 * The path is relative to the repository root, where make runs the compiler (the
 * Makefile lists the file as a prerequisite of the object). One NUL follows the
 * bytes, so text can also be used as a C string. */
#ifndef DEEPMT_SERVER_API_EMBED_H
#define DEEPMT_SERVER_API_EMBED_H

#define DMT_EMBED(sym, path)                                                                                      \
    __asm__(".section .rodata\n"                                                                                  \
            ".balign 16\n" #sym ":\n"                                                                             \
            ".incbin \"" path "\"\n" #sym "_end:\n"                                                               \
            ".byte 0\n"                                                                                           \
            ".previous\n");                                                                                       \
    extern const char sym[], sym##_end[]

#endif
