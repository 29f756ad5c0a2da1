/*
 * sl_prompts.h: reads the held-out prompt sets data/prompts/{prose,code}.txt.
 *
 * Format (data/README.md): UTF-8, one prompt per line; inside a prompt a backslash escapes
 * \n (newline), \t (tab), \r (carriage return) and \\ (backslash); any other escape, an empty
 * line, an empty file or invalid UTF-8 is SL_EINPUT naming the file and line.
 */
#ifndef SL_PROMPTS_H
#define SL_PROMPTS_H

#include <stddef.h>

typedef struct {
    size_t n;      /* number of prompts */
    char **text;   /* (n) unescaped, NUL-terminated */
    size_t *len;   /* (n) bytes of each */
} sl_prompts;

int sl_prompts_read(const char *path, sl_prompts **out);
void sl_prompts_free(sl_prompts *p);

#endif
