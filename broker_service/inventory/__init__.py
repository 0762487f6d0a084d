"""Where the broker learns which data server serves which segment: ZooKeeper or HTTP change feeds."""

from broker_service.inventory.base import InventoryStatus, ServerInventory

__all__ = ["InventoryStatus", "ServerInventory"]
