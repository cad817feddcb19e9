"""The masker of a job's secrets, which every reader of task logs goes through."""

from __future__ import annotations

from protocol import secret_masker

JOB = {
    "secrets": {"token": "s3cr3t-value", "nested": {"list": ["first-one", {"deep": "deep-one"}]}},
    "prerequisites": [
        {"name": "img", "type": "dockerimage", "auth": {"password": "registry-pw"}},
        {"name": "ref", "type": "dockerimage", "auth": {"password": "<% $secrets.token %>"}},
    ],
}


def test_every_secret_however_nested_and_a_literal_registry_password_is_masked():
    text = b"s3cr3t-value first-one deep-one registry-pw"
    assert secret_masker(JOB)(text) == b"****** ****** ****** ******"


def test_short_values_and_booleans_are_left_alone_but_long_numbers_are_masked():
    mask = secret_masker({"secrets": {"a": "ab", "b": True, "port": 31337}})
    assert mask(b"ab True 31337") == b"ab True ******"


def test_a_job_without_secrets_leaves_the_text_as_it_is():
    mask = secret_masker({"secrets": {}})
    assert mask.margin == 0
    assert mask(b"nothing to hide", start=8) == b"to hide"


def test_a_longer_secret_is_masked_before_one_it_contains():
    mask = secret_masker({"secrets": {"a": "pass", "b": "password"}})
    assert mask(b"password pass") == b"****** ******"


def test_a_window_masks_a_secret_it_cuts_and_skips_those_before_it():
    mask = secret_masker(JOB)
    data = b"s3cr3t-value then s3cr3t-value!"
    start = data.rindex(b"value")  # the window starts inside the second secret
    assert mask(data, start=start) == b"******!"
    assert mask.margin == len("s3cr3t-value")


def test_a_literal_auth_field_that_openpai_allows_beyond_the_known_ones_is_a_secret():
    from protocol import mask_secrets, masks_left

    job = {
        "prerequisites": [
            {
                "name": "img",
                "type": "dockerimage",
                "auth": {"username": "bob", "registryuri": "r.io", "identitytoken": "tok-12345"},
            }
        ]
    }
    assert secret_masker(job)(b"bob r.io tok-12345") == b"bob r.io ******"
    masked = mask_secrets(job)
    assert masked["prerequisites"][0]["auth"] == {
        "username": "bob",
        "registryuri": "r.io",
        "identitytoken": "******",
    }
    assert masks_left(masked) == ["prerequisites[0].auth.identitytoken"]
