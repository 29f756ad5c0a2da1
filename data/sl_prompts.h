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
#include <stdint.h>

typedef struct {
    size_t n;      /* number of prompts */
    char **text;   /* (n) unescaped, NUL-terminated */
    size_t *len;   /* (n) bytes of each */
} sl_prompts;

int sl_prompts_read(const char *path, sl_prompts **out);
void sl_prompts_free(sl_prompts *p);

/* Prompts given as token ids (for models without a tokenizer, or to bypass it): one prompt per line
 * of whitespace-separated ids, each in [0, INT32_MAX]; an empty line, a non-number or an empty file
 * is SL_EINPUT naming the file and line (as "prompt_ids: FILE line L: ..."). The ids are checked
 * against a vocabulary by the caller. */
typedef struct {
    size_t n;      /* number of prompts */
    int32_t **ids; /* (n) */
    size_t *len;   /* (n) ids in each */
} sl_prompt_ids;

int sl_prompt_ids_read(const char *path, sl_prompt_ids **out);
void sl_prompt_ids_free(sl_prompt_ids *p);

#endif
