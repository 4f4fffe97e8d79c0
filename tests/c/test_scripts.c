/* test_scripts.c — model/scripts.c: the script of a letter, the scripts of a
 * language code, and words with a letter of a script a model does not know. */
#include <string.h>

#include "check.h"
#include "model/scripts.h"

#define BIT(s) DMT_SCRIPT_BIT(DMT_SCRIPT_##s)

static int foreign(const char *word, dmt_scripts known) {
    return dmt_scripts_foreign_letter(word, strlen(word), known);
}

int main(void) {
    /* --- letters ------------------------------------------------------------ */
    static const struct {
        long c;
        int script;
    } letters[] = {
        {'A', DMT_SCRIPT_LATIN},     {'z', DMT_SCRIPT_LATIN},      {0xE9, DMT_SCRIPT_LATIN},  /* é */
        {0x141, DMT_SCRIPT_LATIN},   {0x1E9E, DMT_SCRIPT_LATIN},   {0xFB01, DMT_SCRIPT_LATIN}, /* Ł ẞ ﬁ */
        {0x3B1, DMT_SCRIPT_GREEK},   {0x1F00, DMT_SCRIPT_GREEK},   {0x416, DMT_SCRIPT_CYRILLIC},
        {0x454, DMT_SCRIPT_CYRILLIC}, {0x5E9, DMT_SCRIPT_HEBREW},  {0x645, DMT_SCRIPT_ARABIC},
        {0x928, DMT_SCRIPT_DEVANAGARI}, {0xE01, DMT_SCRIPT_THAI},  {0x10D0, DMT_SCRIPT_GEORGIAN},
        {0xAC00, DMT_SCRIPT_HANGUL}, {0xD7A3, DMT_SCRIPT_HANGUL},  {0x3042, DMT_SCRIPT_KANA},
        {0x30AB, DMT_SCRIPT_KANA},   {0x4E2D, DMT_SCRIPT_HAN},     {0x20000, DMT_SCRIPT_HAN},
        {0x531, DMT_SCRIPT_ARMENIAN}, {0x1200, DMT_SCRIPT_ETHIOPIC},
    };
    int right = 0, n = (int)(sizeof letters / sizeof letters[0]);
    for (int i = 0; i < n; i++) {
        int got = dmt_script_of(letters[i].c);
        if (got == letters[i].script) right++;
        else printf("# U+%04lX: script %d, want %d\n", letters[i].c, got, letters[i].script);
    }
    CHECK(right == n, "letters of 13 scripts, at the edges of their blocks too", "%d/%d", right, n);
    static const long common[] = {'0', '9', ' ', '.', '<', 0xB5, 0xD7, 0xF7, 0x37E, 0x387, 0x2014, 0x20AC,
                                  0x3002, 0x1F600, 0x10FFFF, -1};
    int none = 0, k = (int)(sizeof common / sizeof common[0]);
    for (int i = 0; i < k; i++) none += dmt_script_of(common[i]) == -1;
    CHECK(none == k, "digits, punctuation, the micro and multiplication signs, the Greek question mark, the euro, "
                     "the ideographic full stop and emoji belong to no script", "%d/%d", none, k);

    /* --- languages ------------------------------------------------------------ */
    CHECK(dmt_language_scripts("en") == BIT(LATIN) && dmt_language_scripts("cs") == BIT(LATIN) &&
              dmt_language_scripts("DE") == BIT(LATIN) && dmt_language_scripts("pt-BR") == BIT(LATIN) &&
              dmt_language_scripts("pb") == BIT(LATIN) && dmt_language_scripts("fil") == BIT(LATIN),
          "Latin-script languages, with a region, in capitals, LibreTranslate's pb");
    CHECK(dmt_language_scripts("ru") == BIT(CYRILLIC) && dmt_language_scripts("uk") == BIT(CYRILLIC) &&
              dmt_language_scripts("sr") == (BIT(LATIN) | BIT(CYRILLIC)),
          "Russian and Ukrainian are Cyrillic; Serbian both");
    CHECK(dmt_language_scripts("sr-Latn") == BIT(LATIN) && dmt_language_scripts("sr_Cyrl") == BIT(CYRILLIC) &&
              dmt_language_scripts("zh-Hant-TW") == (BIT(HAN) | BIT(BOPOMOFO)) &&
              dmt_language_scripts("en-Cyrl") == BIT(CYRILLIC),
          "a script subtag decides alone");
    CHECK(dmt_language_scripts("ja") == (BIT(KANA) | BIT(HAN)) && dmt_language_scripts("ko") == (BIT(HANGUL) | BIT(HAN)) &&
              dmt_language_scripts("zt") == (BIT(HAN) | BIT(BOPOMOFO)) && dmt_language_scripts("el") == BIT(GREEK),
          "Japanese, Korean, Chinese (and LibreTranslate's zt), Greek");
    CHECK(dmt_language_scripts("xx") == 0 && dmt_language_scripts("") == 0 && dmt_language_scripts(NULL) == 0 &&
              dmt_language_scripts("-Latn") == BIT(LATIN) && dmt_language_scripts("e") == 0 &&
              dmt_language_scripts("english") == 0 && dmt_language_scripts("de-") == BIT(LATIN),
          "unknown codes give 0, never a guess; a code's prefix is not the code");

    /* --- one-letter words --------------------------------------------------- */
    CHECK(!strcmp(dmt_language_letter_words("en"), "ai") && !strcmp(dmt_language_letter_words("de-AT"), "") &&
              !strcmp(dmt_language_letter_words("cs"), "aikosuvz") && strchr(dmt_language_letter_words("fr"), 'y') &&
              dmt_language_letter_words("xx") == NULL && dmt_language_letter_words("") == NULL &&
              dmt_language_letter_words(NULL) == NULL,
          "one-letter words: English a and I, none in German, Czech's eight, French y; unknown codes NULL");

    /* --- foreign letters ----------------------------------------------------------- */
    dmt_scripts latin = BIT(LATIN);
    CHECK(foreign("\xD0\x9C\xD0\xBE\xD1\x81\xD0\xBA\xD0\xB2\xD0\xB0", latin) &&
              foreign("\xCE\xB1-helix", latin) && foreign("Stra\xC3\x9F" "e\xE4\xB8\xAD", latin),
          "a Cyrillic word, a Greek letter in a Latin word, a Han character after Latin ones are foreign to Latin");
    CHECK(!foreign("Stra\xC3\x9F" "e", latin) && !foreign("\xC5\x81\xC3\xB3" "d\xC5\xBA", latin) &&
              !foreign("\xE2\x82\xAC" "5", latin) && !foreign("\xE2\x80\x94", latin) && !foreign("", latin),
          "German, Polish, the euro sign and a dash are not");
    CHECK(foreign("Moscow", BIT(CYRILLIC)) && !foreign("\xD0\x9C\xD0\xBE\xD1\x81", BIT(CYRILLIC) | latin),
          "to a Cyrillic-only model a Latin word is foreign; to a Latin and Cyrillic one neither is");
    CHECK(!foreign("\xD0", 0) && foreign("\xD0\x9C", 0), "a lead byte without its continuation is no letter");
    CHECK(!foreign("ok\xFF\xD0\x9C", latin), "reading stops at invalid UTF-8");
    return check_done();
}
