"""hosts/training.py's harness additions: model registry, data sets, held-out set, targets."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("sklearn")

from hosts import training as tr  # noqa: E402


def n_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    return all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))


@pytest.fixture(scope="module")
def digits() -> tr.DigitsData:
    return tr.load_digits_split(0)


def test_parameter_counts() -> None:
    assert n_params(tr.build_model("digits", 0)) == 3_818
    assert n_params(tr.build_model("digits-wide", 0)) == 29_066
    assert n_params(tr.build_model("mlp", 0)) == 126_090
    assert n_params(tr.make_model(0)) == 3_818  # the existing default is unchanged


@pytest.mark.parametrize("name", sorted(tr.MODELS))
def test_same_seed_same_weights(name: str) -> None:
    a, b, c = tr.build_model(name, 3), tr.build_model(name, 3), tr.build_model(name, 4)
    assert same_weights(a, b)
    assert not any(torch.equal(p, q) for p, q in zip(a.parameters(), c.parameters(), strict=True)
                   if p.numel() > 16)


def test_digits_is_make_model_and_leaves_rng_alone() -> None:
    assert same_weights(tr.build_model("digits", 7), tr.make_model(7))
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    tr.build_model("mlp", 1)
    assert torch.equal(torch.rand(3), expected)


@pytest.mark.parametrize("name", sorted(tr.MODELS))
@pytest.mark.parametrize("data_name", tr.DATASETS)
def test_models_take_both_data_sets(name: str, data_name: str) -> None:
    data = tr.load_data(data_name, 0)
    assert tuple(data.x_train.shape[1:]) == (1, 8, 8)
    out = tr.build_model(name, 0)(data.x_test[:5])
    assert tuple(out.shape) == (5, 10)


def test_unknown_names_rejected(digits: tr.DigitsData) -> None:
    with pytest.raises(ValueError, match="digits.*mlp"):
        tr.build_model("resnet", 0)
    with pytest.raises(ValueError, match="synthetic"):
        tr.load_data("mnist", 0)


def test_heldout_size_and_content(digits: tr.DigitsData) -> None:
    x, y = tr.heldout_set(digits, 0)
    n = len(digits.y_test)
    assert n == 449
    assert tuple(x.shape) == (9 * n, 1, 8, 8) and tuple(y.shape) == (9 * n,)
    assert torch.equal(x[:n], digits.x_test) and torch.equal(y[:n], digits.y_test)
    # deterministic, independent of the seed argument
    x2, y2 = tr.heldout_set(digits, 5)
    assert torch.equal(x, x2) and torch.equal(y, y2)
    # one shifted block is the originals moved by one pixel with a zero border
    k = tr.SHIFTS.index((1, 1))
    block = x[(k + 1) * n:(k + 2) * n]
    assert torch.equal(block[:, :, 1:, 1:], digits.x_test[:, :, :-1, :-1])
    assert torch.all(block[:, :, 0, :] == 0) and torch.all(block[:, :, :, 0] == 0)


def test_heldout_contains_no_training_image(digits: tr.DigitsData) -> None:
    x, _ = tr.heldout_set(digits, 0)
    train = {bytes(v.numpy().tobytes()) for v in digits.x_train}
    assert not any(bytes(v.numpy().tobytes()) in train for v in x)


def test_shift_images() -> None:
    x = torch.arange(9.0).reshape(1, 1, 3, 3)
    assert tr.shift_images(x, 0, 1)[0, 0].tolist() == [[0, 0, 1], [0, 3, 4], [0, 6, 7]]
    assert tr.shift_images(x, -1, 0)[0, 0].tolist() == [[3, 4, 5], [6, 7, 8], [0, 0, 0]]


def test_synthetic_split_sizes_and_determinism() -> None:
    a = tr.load_synthetic_split(0, n_train=600, n_test=400)
    assert a.source == "synthetic"
    assert tuple(a.x_train.shape) == (600, 1, 8, 8) and tuple(a.x_test.shape) == (400, 1, 8, 8)
    assert a.x_train.dtype == torch.float32 and a.y_train.dtype == torch.int64
    assert set(a.y_train.tolist()) == set(range(10))
    b = tr.load_synthetic_split(0, n_train=600, n_test=400)
    assert torch.equal(a.x_train, b.x_train) and torch.equal(a.y_test, b.y_test)
    c = tr.load_synthetic_split(1, n_train=600, n_test=400)
    assert not torch.equal(a.y_train, c.y_train)
    full = tr.load_data("synthetic", 0)
    assert (len(full.y_train), len(full.y_test)) == (6000, 6000)
    # for the synthetic set the held-out set is its (large, independent) test split
    hx, hy = tr.heldout_set(full, 0)
    assert hx is full.x_test and hy is full.y_test


def test_load_data_digits_is_the_existing_split(digits: tr.DigitsData) -> None:
    d = tr.load_data("digits", 0)
    assert torch.equal(d.x_train, digits.x_train) and torch.equal(d.y_test, digits.y_test)
    assert d.source == "digits"


def test_evaluate_sets(digits: tr.DigitsData) -> None:
    model = tr.build_model("digits", 0)
    held = tr.heldout_set(digits, 0)
    res = tr.evaluate_sets(model, digits, held)
    assert set(res) == {"test", "heldout"}
    assert res["test"] == pytest.approx(tr.evaluate(model, digits))
    assert all(0.0 <= v <= 1.0 for v in res.values())


def test_mlp_sgd_steps_reduce_loss(digits: tr.DigitsData) -> None:
    model = tr.build_model("mlp", 0)
    x, y = digits.x_train[:256], digits.y_train[:256]

    def loss() -> float:
        with torch.no_grad():
            return float(torch.nn.functional.cross_entropy(model(x), y))

    before = loss()
    for _ in range(30):
        grads = tr.compute_gradients(model, x, y)
        tr.apply_gradients(model, grads, lr=tr.DEFAULT_LR["mlp"])
    assert loss() < 0.9 * before


def test_targets_and_learning_rates_cover_every_pair() -> None:
    for model in tr.MODELS:
        assert 0.0 < tr.DEFAULT_LR[model] <= 1.0
        for data in tr.DATASETS:
            assert 0.1 < tr.TARGET_ACCURACY[(model, data)] < 1.0
    assert tr.DEFAULT_LR["digits"] == 0.5
    assert tr.TARGET_ACCURACY[("digits", "digits")] == 0.90
