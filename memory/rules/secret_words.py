"""The word lists of the prose-secret rules (:mod:`memory.rules.secret_prose`).

English words that tell a description, a pointer or a sentence from a
credential's value. Standard library only, no I/O.
"""

from __future__ import annotations


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Words of any sentence (articles, pronouns, auxiliaries, prepositions, ...):
# never a value, and never part of a passphrase.
_SENTENCE_WORDS = _words(
    """
a an the my your his her our their its this that these those it one some any no not here
there on in at under behind with for from by of to into inside about over near next same
also too so very either neither both all each every just only even still always never now
then what which who whom where how why when is was be been being are were will would should
can could must may might has have had do does did
    """
)

#: A word right after the noun that makes it part of another thing: a
#: "password manager" or a "PIN pad" is not a password or a PIN.
COMPOUND_HEADS = _words(
    """
manager managers reset resets rule rules policy policies requirement requirements hint hints
field fields box screen screens page prompt prompts strength length generator generators app
apps protection protected change changes expiry expiration entry input form dialog popup
email emails link links sharing keeper book notebook list file spreadsheet vault vaults pad
pads board boards cushion cushions drive drawer needle needles hole holes point protect
protecting recovery reminder reminders security requests request login generation storage
analysis hygiene hash hashes hashing brush brushes strategy strategies count counts header
headers layout layouts out outs diagram diagrams ball balls collection collections badge
badges trading collector collectors
    """
)

#: "login page", "login issues": the statement is about another thing.
LOGIN_COMPOUND_HEADS = COMPOUND_HEADS | _words(
    """
page pages screen screens issue issues problem problems attempt attempts time times
    """
)

#: Words that describe a credential, or point to it, rather than being it.
NOT_VALUES = _SENTENCE_WORDS | _words(
    """
none nothing something someone somewhere anything everything everywhere below above attached
different really pretty quite rather whose whatever gonna going getting two three four five
six seven eight nine ten eleven twelve twenty strong weak long short simple easy hard tough
complicated complex new old unique random temporary forgotten lost gone invalid valid
correct right wrong fine ok okay good bad terrible great awful memorable obvious private
personal confidential secret encrypted blank empty unknown public shared common default
generic weird silly funny cute clever stale outdated required needed necessary optional
mandatory due useless pointless annoying impossible tricky secure safe unsafe insecure
incorrect ready set mine yours ours theirs hers such similar case-sensitive case sensitive
enough expired reset changed saved stored written working broken fixed sorted lowercase
uppercase numeric alphanumeric numbers letters digits characters symbols words word number
digit character letter pin code password passcode passphrase same-as sensible reasonable
decent solid ridiculous crazy insane absurd lame dumb stupid embarrassing boring nice cool
awesome perfect lengthy low high medium str string int integer bool boolean text varchar
char bytes null nil true false undefined hash field column
    """
)

#: Adjectives ending in "ary": that ending is also a noun's ("canary",
#: "library"), so only these read as descriptions.
ARY_ADJECTIVES = _words(
    """
temporary necessary unnecessary arbitrary ordinary extraordinary primary secondary contrary
voluntary customary solitary sanitary legendary imaginary preliminary binary elementary
momentary honorary hereditary complementary supplementary stationary visionary revolutionary
unitary monetary literary exemplary sedentary proprietary
    """
)

#: Endings of descriptive words: "expired", "annoying", "unbreakable", "useless".
DESCRIPTIVE_ENDINGS = (
    "ed",
    "ing",
    "ly",
    "able",
    "ible",
    "ful",
    "less",
    "ous",
    "ive",
    "ic",
    "ical",
    "al",
    "ent",
    "ant",
    "ure",
)

#: Last parts of hyphenated words that say how a password is made or kept.
HYPHENATED_DESCRIPTIONS = _words(
    """
based free only specific sensitive style like wide proof friendly length long
    """
)

#: A security answer is never a pronoun: "Security answer: I always lie on those."
PRONOUNS = _words(
    """
i i'm i've i'd i'll me you you're he she we we're they they're him us them
    """
)

#: Words of sentences, never of a passphrase (which is a few nouns and adjectives).
FUNCTION_WORDS = _SENTENCE_WORDS | _words(
    """
i me you he she we they us them without as than like shall first last before after again day
days week weeks month months year years today yesterday tomorrow ago
    """
)

#: Verbs an instruction starts with: "Password: ask dad first" says where to get it.
PHRASE_VERBS = _words(
    """
ask see check use call text look find get try contact type enter refer read go pick choose
make keep write set change reset email message ping
    """
)
