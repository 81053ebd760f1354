"""Credentials stated in plain words (memory.rules.secret_prose, via detect_secret)."""

from __future__ import annotations

import pytest

from memory.errors import SECRET_REJECTED, MemoryServiceError
from memory.rules.text import check_secret, detect_secret

# (sentence, kind): each states a credential's value.
STATED: list[tuple[str, str]] = [
    ("My home wifi password is BlueCanary77", "password"),
    ("password: hunter2", "password"),
    ("Password: hunter2", "password"),
    ("my gmail pw is Tr0ub4dor&3", "password"),
    ("The wifi password at grandma's is 'sunflower'", "password"),
    ('The wifi password at the cabin is "pinecone".', "password"),
    ("The wifi password at the cabin is “moose lake”.", "password"),
    ("My password is sunflower.", "password"),
    ("my netflix password is Sunflower", "password"),
    ("The password for my work laptop is Winter2024!", "password"),
    ("I changed my password to BlueCanary78 last week.", "password"),
    ("My old password was hunter2, don't reuse it.", "password"),
    ("Bank password = Xk9#mPq2", "password"),
    ("my email password is bob12345", "password"),
    ("My Amazon login password is P@ssw0rd", "password"),
    ("The router admin password is admin123.", "password"),
    ("wifi password BlueCanary77", "password"),
    ("The password to my laptop is correcthorse99", "password"),
    ("My Spotify password is now musiclover88.", "password"),
    ("the password for the guest network is 'welcome home'", "password"),
    ("My password is 123456", "password"),
    ("Dad's iPad password is 0915.", "password"),
    ("pwd: s3cr3t!", "password"),
    ("The wifi key is 8f3kd93ks0", "password"),
    ("My passphrase is 'correct horse battery staple'.", "passphrase"),
    ("passphrase: river-otter-42-maple", "passphrase"),
    ("My phone passcode is 482913", "passcode"),
    ("The passcode for my iPhone is 1379.", "passcode"),
    ("My iPad passcode is 2580", "passcode"),
    ("PIN 4821", "PIN"),
    ("My PIN is 4821", "PIN"),
    ("my debit card pin is 7734", "PIN"),
    ("I set my PIN to 0417.", "PIN"),
    ("The PIN for my SIM card is 1111", "PIN"),
    ("My bank PIN: 9021", "PIN"),
    ("my pin number is 4 8 2 1", "PIN"),
    ("ATM pin was 5567 before I changed it.", "PIN"),
    ("The PIN on my credit card is 3301.", "PIN"),
    ("My garage door code is 1234", "access code"),
    ("The code for the safe is 36-24-12.", "access code"),
    ("the alarm code is 8842#", "access code"),
    ("The gate code at my apartment is *2291", "access code"),
    ("Front door code: 5519", "access code"),
    ("The combination to my locker is 12-34-56.", "access code"),
    ("My bike lock combination is 4432", "access code"),
    ("the code to the office door is 7781", "access code"),
    ("The building entry code is 2468.", "access code"),
    ("The keypad code for the shed is 0007", "access code"),
    ("The lockbox code at the rental is 3190", "access code"),
    ("my access code is 55AB21", "access code"),
    ("Our house alarm code is 90210.", "access code"),
    ("The safe combination is 10 20 30", "access code"),
    ("My Google backup codes are 8412-5521 and 9934-1120", "access code"),
    ("The security code on my Visa is 442.", "access code"),
    ("The answer to my security question is Fluffy", "security answer"),
    ("My security answer is Rover.", "security answer"),
    ("security question answer: Springfield", "security answer"),
    ("The answer to my bank security question is 'blue'.", "security answer"),
    ("my secret answer is pizza", "security answer"),
    ("The answers to my security questions are Fluffy and Maple Street", "security answer"),
    ("Remember: my work password is Giraffe$Neck9, don't forget it.", "password"),
    ("Note to self - wifi password is BlueCanary77 and the guest one is Guest2023", "password"),
    ("My Netflix login is bob@example.com and the password is Qwerty!23", "password"),
    ("The wifi password is purplemonkeydishwasher", "password"),
    ("the password's BlueCanary77", "password"),
    ("I told Sam my wifi password is Hunter2", "password"),
    ("My voicemail PIN is 2468", "PIN"),
    ("Our alarm code is 1-9-8-4", "access code"),
    ("The code to unlock my phone is 0000", "access code"),
    ("Security answer: Maple Street", "security answer"),
    ("The answer to the security question about my first car is Corolla", "security answer"),
    ("My password is Envy123", "password"),
    ("my pw is MyDogRex", "password"),
    # A year after a connector is a value, unlike one right after "pin".
    ("my PIN is 2019", "PIN"),
    ("My PIN: 2019", "PIN"),
    # A single plain word ending the clause: "ary" is a noun's ending too.
    ("My password is bluecanary", "password"),
    # A capitalised word in a password's place is one, even when it is also
    # the name of something: nothing in the sentence says otherwise.
    ("Her password is Python, she says", "password"),
    ("login password \u2192 BlueCanary77", "password"),
    ("login password -> BlueCanary77", "password"),
    ("login password => hunter2", "password"),
    ("passphrase: river-otter-maple", "passphrase"),
    # Hidden characters do not hide a password (a new-user trial, issue 13):
    # zero-width space, soft hyphen, BOM, a bidi mark, full-width letters.
    ("pass\u200bword is BlueCanary77", "password"),
    ("my pass\u00adword is BlueCanary77", "password"),
    ("pass\ufeffword: hunter2", "password"),
    ("PIN\u200e 4821", "PIN"),
    ("My \uff50\uff41\uff53\uff53\uff57\uff4f\uff52\uff44 is BlueCanary77", "password"),
    ("My \uff30\uff29\uff2e: 4821", "PIN"),
    # Passphrases of plain lowercase words, named or labelled.
    ("passphrase: correct horse battery staple", "passphrase"),
    ("My passphrase is correct horse battery staple", "passphrase"),
    ("The password to my laptop: correct horse battery staple", "password"),
    ("Password: purple elephant banana tree", "password"),
    # A user and a secret after a login or credentials statement.
    ("The router login is admin / BlueCanary77", "password"),
    ("My Netflix login is ana@example.com / BlueCanary77", "password"),
    ("credentials: user rowan, pass Summer2024", "password"),
    ("Office VPN credentials are rowan | Winter2024!", "password"),
    # A network, a colon and what only a key looks like.
    ("wifi: BlueCanary77", "password"),
    ("Guest WiFi: Welcome2023.", "password"),
    # Other languages: password and PIN, secret-looking values only.
    ("Mein Passwort ist BlueCanary77", "password"),
    ("Das Kennwort lautet Sommer2024!", "password"),
    ("Mi contraseña es BlueCanary77", "password"),
    ("Mi contraseña del banco es 'girasol'", "password"),
    ("Mon mot de passe est BlueCanary77", "password"),
    ("La mia password è BlueCanary77", "password"),
    ("A minha senha é BlueCanary77", "password"),
    ("Mijn wachtwoord is BlueCanary77", "password"),
    ("Mein PIN ist 4821", "PIN"),
    ("Meine Geheimzahl ist 4821", "PIN"),
    ("Mi PIN es 4821", "PIN"),
    ("Mon code PIN est 1234", "PIN"),
    ("Mijn pincode is 1234", "PIN"),
]

# Talk about credentials, and ordinary facts that share their words.
ABOUT: list[str] = [
    "I forgot my password yesterday",
    "my PIN is four digits long",
    "My PIN is 4 digits long.",
    "I use a password manager",
    "My password manager is 1Password.",
    "I changed my password last week",
    "my bank asked me to set a new PIN",
    "the password rules require 12 characters",
    "Passwords should be long",
    "I reset my password",
    # No value stated: where a secret is kept is not the secret.
    "the password is on a sticky note",
    "The wifi password is on the back of the router.",
    "my favourite code editor is VS Code",
    "The pin on my map is Rome",
    "I pinned the note",
    "the passcode screen annoys me",
    "my code review is due Friday",
    "the safe is in the closet",
    "My password expired and I had to pick a new one.",
    "The password is incorrect, it keeps saying.",
    "My password is too weak according to the site.",
    "My new password is much stronger than the old one.",
    "I need to send my password to Bob",
    "I keep my passwords in a notebook.",
    "The password has to be at least 8 characters.",
    "My password is 12 characters long.",
    "I typed my PIN wrong three times.",
    "I enter my PIN twice a day.",
    "The PIN pad at the store was broken.",
    "My bank PIN expires in 2025.",
    "I got locked out after 3 wrong password attempts.",
    "The dress code for the wedding is black tie.",
    "Her area code is 415.",
    "The zip code is 94110.",
    "The code is on GitHub.",
    "my code is written in Python 3",
    "The secret to good bread is patience.",
    "The answer is 42.",
    "My security question is the name of my first pet.",
    "I set up two-factor authentication with an app.",
    "My passport number is in the drawer.",
    "I passed my driving test on the 2nd try.",
    "She pinned 3 photos to the board.",
    "The safe word at the gym is pineapple.",
    "The password reset link is in my email.",
    "I asked IT for a password reset on Monday.",
    "My wifi password is shared with the neighbours.",
    "I told my sister the password was changed.",
    "My password is the name of my dog plus a number.",
    "The password was something I made up in 2015.",
    "The door code changed again.",
    "My password policy at work is 90 days.",
    "The password hint is my first school.",
    "Passcodes are required on every work phone.",
    "My PIN is the same as my birthday.",
    "I have to change my password every 90 days.",
    "I bought a new combination lock for the gym.",
    "The security answer is case-sensitive.",
    "We talked about password security at the meetup.",
    "My favourite pin badge is from Disneyland 2019.",
    "The bowling pins at the alley are 15 inches tall.",
    "My alarm is set to 6:30am every day.",
    "The gate is open from 9 to 5.",
    "The door is painted blue.",
    "Wi-Fi at the cafe is free.",
    "My son Colby lives in Los Angeles.",
    "I'm allergic to peanuts.",
    "My password is not something I'd share.",
    "The answer to my question is yes.",
    "My phone passcode is six digits.",
    "The code for the safe is in my notebook.",
    "What is the wifi password?",
    "I keep every password LastPass generates.",
    "I sent my password to LastPass.",
    "The pin on my map is NewYork.",
    "My password is sunflower yellow now.",
    "The answer to my security question is the city I was born in.",
    "I sent my PIN to 2 people.",
    "The wifi password - ask the host.",
    "The password was accepted.",
    "I put a pin in the map at Paris.",
    "He got a pin for 10 years of service.",
    "The secret code in the game is up-up-down-down.",
    "The code is 200 lines long.",
    "The password is too short, it needs 8 characters.",
    "My passwords are all stored in Bitwarden.",
    "My PIN is 4 numbers.",
    "I have 2 passwords to remember.",
    "My wifi password is different from my email password.",
    "My bank account number is 12345678.",
    "The promo code is SUMMER20.",
    "My zip code is 02139.",
    "The wifi network is called HomeNet5G.",
    "My grandma's PIN is her birthday.",
    "the PIN is the last four digits of my phone number",
    # From LongMemEval's assistant turns: markdown, code and placeholders.
    "**Password Generation:** LastPass generates strong, unique passwords for each account.",
    "**Password Storage:** LastPass stores your login credentials in an encrypted vault.",
    "**Password protection**: Your data is protected with a password.",
    "**Other password managers:**",
    "* **Pin regularly**: Maintain a consistent pinning schedule.",
    "Consider a slicker brush or a pin brush**: Slicker brushes have fine teeth.",
    'string password = "your-password";',
    'conn = psycopg2.connect(user="your_username", password="your_password", host="localhost")',
    "    password: str",
    "It has two fields, `email` and `password`, both of which are of type `str`.",
    "\t* password\\_hash (string, required)",
    "Require strong passwords: Require your employees to use passwords that are lengthy and mixed.",
    'Set password = "<password>" in the config file.',
    "My password is ********.",
    # Years, counts and parts after "pin" (review of issue 12).
    "I bought a pin 2019 edition",
    "He got his first pin 1998.",
    "Our team uses pin 2024 badges",
    "My enamel pin count is 340",
    "The pin count is 144 on that chip",
    "PIN 144-ball BGA package",
    "The pin header is 2x20",
    "My pin collection is 200 strong",
    # Talk about answering, and about how a password is made.
    "Security answer: I always lie on those.",
    "The security answer: they never check it.",
    "My password is Bitwarden-generated.",
    "My password is LastPass-managed.",
    "My password is self-destructing",
    "Password: argon2id with 64 MiB memory.",
    "Password: bcrypt hashed",
    "I changed the garage door code to 2024 standards.",
    "I set the alarm code to 2024 rules.",
    # Adjectives ending in "ary" still describe.
    "my password is temporary",
    "My password is necessary.",
    "my password is compromised",
    "wifi password \u2192 on the fridge",
    # Several words after "the password is" say where or what it is like;
    # after a label they may be a rule or an instruction.
    "the password to my laptop is on a sticky note",
    "Password: must be at least 12 characters",
    "Password: ask dad first",
    "Password: changed last week",
    "Password: long random words",
    "passphrase: four random words",
    "My passphrase is stored in my vault",
    # Hidden characters in talk about a password are still talk.
    "I forgot my pass\u200bword yesterday",
    # Logins and networks without a secret-looking value.
    "My login is via SSO / OAuth2",
    "The login page is at example.com/login",
    "My Netflix login is my work email / the usual one",
    "wifi: fast",
    "wifi: NETGEAR47",
    "wifi: HomeNet5G",
    "Wi-Fi: 5GHz",
    # Other languages: talk about a password, and descriptions.
    "Ich habe mein Passwort vergessen",
    "Mein Passwort ist sicher",
    "Mein Passwort ist 12 Zeichen lang",
    "Olvidé mi contraseña",
    "Mi contraseña es muy larga",
    "J'ai oublié mon mot de passe",
    "Mon mot de passe est trop court",
    "La mia password è facile",
    "Esqueci minha senha",
    "Mijn wachtwoord is verlopen",
    # A family fact, not a security answer: no credential is named.
    "My mother's maiden name is Smith",
]


@pytest.mark.parametrize(("text", "kind"), STATED)
def test_stated_credential_is_a_secret(text: str, kind: str) -> None:
    assert detect_secret(text) == kind


@pytest.mark.parametrize("text", ABOUT)
def test_talk_about_credentials_is_not_a_secret(text: str) -> None:
    assert detect_secret(text) is None


def test_tables_are_large_and_distinct() -> None:
    assert len(STATED) >= 60 and len(ABOUT) >= 60
    assert len({text for text, _ in STATED}) == len(STATED)
    assert len(set(ABOUT)) == len(ABOUT)


@pytest.mark.parametrize(
    ("text", "kind", "secret"),
    [
        ("My home wifi password is BlueCanary77", "password", "BlueCanary77"),
        ("My PIN is 4821", "PIN", "4821"),
        ("The answer to my security question is Fluffy", "security answer", "Fluffy"),
    ],
)
def test_check_secret_names_the_kind_never_the_value(text: str, kind: str, secret: str) -> None:
    with pytest.raises(MemoryServiceError) as excinfo:
        check_secret(text)
    error = excinfo.value
    assert error.code == SECRET_REJECTED
    assert error.detail == {"field": "text", "kind": kind}
    assert f"({kind})" in error.message
    assert secret not in error.message and secret not in str(error.detail)


def test_a_stated_credential_deep_in_a_long_text_is_found() -> None:
    talk = "We talked about pins, passwords and codes for a while. " * 20  # 40 nouns
    prose = talk + "Then we walked home along the river and had dinner. " * 250  # ~14,000 chars
    assert detect_secret(prose) is None
    assert detect_secret(prose + "My PIN is 4821.") == "PIN"


def test_a_text_full_of_credential_nouns_is_decided() -> None:
    # 5,334 nouns: only the first ones are examined, so this costs what a
    # short text costs (a bound on worker CPU, measured, not asserted here).
    noise = ("pw " * 5334)[:16_000]
    assert detect_secret(noise) is None
    assert detect_secret("My PIN is 4821. " + noise) == "PIN"


def test_a_secret_tag_is_refused_with_its_index() -> None:
    from memory.errors import MemoryServiceError
    from memory.rules.text import normalize_tags

    with pytest.raises(MemoryServiceError) as refused:
        normalize_tags(["family", "password BlueCanary77"], refuse_secrets=True)
    assert refused.value.code == "SECRET_REJECTED"
    assert refused.value.detail == {"field": "tags", "kind": "password", "index": 1}


def test_a_tag_that_is_not_stored_is_not_read_for_secrets() -> None:
    from memory.rules.text import MAX_TAG_CHARS, normalize_tags

    # Over the tag length: dropped, not stored, so nothing of it can leak.
    too_long = "password BlueCanary77 " + "x" * MAX_TAG_CHARS
    assert normalize_tags(["family", too_long], refuse_secrets=True) == ["family"]
    # A long raw tag whose stored form is short is read in that stored form.
    padded = "password " + "!" * 5000 + " bluecanary77"
    with pytest.raises(Exception, match="secret"):
        normalize_tags([padded], refuse_secrets=True)


def test_many_network_words_in_a_long_text_are_decided() -> None:
    # Once quadratic (every "wifi:" scanned to the end of the text and back).
    assert detect_secret("wifi:" * 4000 + " x") is None
